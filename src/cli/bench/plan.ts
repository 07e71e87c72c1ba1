/**
 * How much each scenario measures. The full plan is what BENCHMARKS.md reports; `--quick` is for
 * a look in under a minute, every column included: the same per-step latency and CPU burn, but
 * fewer samples and rounds, fewer children where their number is the cost (S4, S5, S7, S9, S9u) and a
 * shorter stream at the same pace (S9, S9u, O9), so its figures are noisier and the crowded scenarios
 * less crowded. `--smoke` is the least that still computes every figure (two rounds where a
 * figure is a spread of rounds): it shows the bench runs end to end, and its figures say nothing.
 */
import type { PlanName } from './args.js'
import type { StreamShape } from './stream-script.js'

export interface Plan {
  /** S1, S2 and the floor's latency: one delegation at a time, inline and worker alternating in batches. */
  latency: { warmup: number; samples: number; batch: number }
  /** S3 and the floor's throughput: zero model latency. */
  throughput: { warmup: number; total: number; inFlight: number; rounds: number }
  /** S4: a model that takes `latencyMs` per step, two steps a delegation. */
  io: { warmup: number; total: number; inFlight: number; latencyMs: number; rounds: number }
  /**
   * S5 and S6: children each burning `burnMs` of CPU in a module tool, after `warmup` delegations
   * of the same steps with nothing to burn (the runners' own code optimized, as in S3 and S4).
   */
  cpu: { warmup: number; children: number; burnMs: number; rounds: number }
  /** S7: live children held on a pending model request while memory is read. */
  memory: { children: number; rounds: number }
  /** S8: spinning children cancelled; `graceMs` is the host's abortGraceMs. */
  abort: { rounds: number; graceMs: number }
  /**
   * S9, S9u and O9: `children` started at once, each streaming `chunks` chunks one every
   * `intervalMs` (stream-script.ts), on a pool of `threads`. S9 and S9u first warm each host with
   * `warmup` children, in batches of `children`, streaming the same chunks one a millisecond.
   */
  stream: StreamShape & { children: number; threads: number; rounds: number; warmup: number }
  /** S11: `children` started at once on worker threads, `perThread` a thread, `steps` host model steps of `latencyMs`, one thread killed at most every `killEveryMs`. */
  moves: { children: number; perThread: number; steps: number; latencyMs: number; killEveryMs: number; rounds: number }
  /** S10: fresh hosts, one per transport a round, each timed to its first child's result. */
  coldStart: { rounds: number }
  /**
   * The A/B rows (G2, G3, O3, O9): rounds of each arm, taking turns; a round is a batch of
   * S2's (latency.batch delegations), a round of S3's (throughput.total) or a fan-in of S9's.
   */
  ab: { rounds: number }
}

export const FULL_PLAN: Plan = {
  latency: { warmup: 300, samples: 2000, batch: 100 },
  // Warm-ups long enough for each runner (a third of the delegations each) to have compiled its code: see BENCHMARKS.md.
  throughput: { warmup: 20000, total: 5000, inFlight: 64, rounds: 5 },
  io: { warmup: 20000, total: 5000, inFlight: 1000, latencyMs: 20, rounds: 5 },
  cpu: { warmup: 2000, children: 32, burnMs: 50, rounds: 5 },
  memory: { children: 1000, rounds: 3 },
  abort: { rounds: 10, graceMs: 200 },
  // 8,000 children, half on each placement: each runner sees about 2,700 before the first timed batch.
  stream: { children: 1000, threads: 3, rounds: 3, chunks: 100, intervalMs: 20, warmup: 8000 },
  coldStart: { rounds: 10 },
  moves: { children: 1000, perThread: 10, steps: 4, latencyMs: 20, killEveryMs: 1000, rounds: 3 },
  ab: { rounds: 16 },
}

export const QUICK_PLAN: Plan = {
  latency: { warmup: 20, samples: 60, batch: 30 },
  throughput: { warmup: 50, total: 200, inFlight: 64, rounds: 2 },
  // S3's 64 in flight, not 1,000 (so the remote column keeps S3's nodes): each delegation still waits its 2 × 20 ms.
  io: { warmup: 50, total: 150, inFlight: 64, latencyMs: 20, rounds: 2 },
  cpu: { warmup: 20, children: 4, burnMs: 50, rounds: 2 },
  memory: { children: 100, rounds: 1 },
  abort: { rounds: 1, graceMs: 200 },
  // Fewer children, a quarter of the stream at the same pace: a batch's ideal is 500 ms, not 2 s.
  stream: { children: 50, threads: 3, rounds: 1, chunks: 25, intervalMs: 20, warmup: 50 },
  coldStart: { rounds: 2 },
  // A tenth of the children, a kill every 250 ms: a few kills in a round of about a second.
  moves: { children: 100, perThread: 10, steps: 4, latencyMs: 20, killEveryMs: 250, rounds: 1 },
  ab: { rounds: 8 },
}

export const SMOKE_PLAN: Plan = {
  latency: { warmup: 5, samples: 10, batch: 5 },
  throughput: { warmup: 10, total: 40, inFlight: 16, rounds: 2 },
  io: { warmup: 10, total: 40, inFlight: 16, latencyMs: 20, rounds: 2 },
  cpu: { warmup: 4, children: 2, burnMs: 20, rounds: 2 },
  memory: { children: 20, rounds: 1 },
  abort: { rounds: 1, graceMs: 200 },
  stream: { children: 10, threads: 3, rounds: 1, chunks: 10, intervalMs: 20, warmup: 10 },
  coldStart: { rounds: 2 },
  // As quick's: a round must last long enough for its kills to come.
  moves: QUICK_PLAN.moves,
  ab: { rounds: 4 },
}

export const PLANS: Record<PlanName, Plan> = { full: FULL_PLAN, quick: QUICK_PLAN, smoke: SMOKE_PLAN }
