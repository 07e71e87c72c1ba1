/**
 * S5 and S6 share one workload: a batch of children that each run a module tool burning a
 * calibrated 50 ms of CPU. S5 is the batch's wall time, its rounds taking turns with the same
 * burns as bare piscina tasks (the floor); S6 is how late the host's event loop ran during
 * rounds of its own, each transport's back to back (perf_hooks monitorEventLoopDelay). Inline,
 * every burn runs on the host's thread; on workers and child processes the burns run in
 * parallel, off the host's thread.
 */
import { availableParallelism } from 'node:os'
import type { IntervalHistogram } from 'node:perf_hooks'
import { textResponse, toolCallResponse } from '../../../index.js'
import { benchHost, defaultThreads, delegate, HOST_MODEL, useScript, type BenchHost } from '../harness.js'
import { delayMs, loopMonitor, loopTurns, RESOLUTION_MS } from '../measure/loop-delay.js'
import { calibrate } from '../work.js'
import type { ParallelWork } from '../floors/floor.js'
import { LOCAL_MODES, type Figure, type LocalMode, type ScenarioResult } from '../types.js'
import { allMet, processRatioOf, ratioGoal, ratioOf, valueGoal, type Scenario } from './scenario.js'
import { figure } from '../measure/stats.js'

/** The wall ms of `children` delegations at once, each burning `iterations` of `work` in a module tool. */
export async function burnBatch(bench: BenchHost, children: number, iterations: number): Promise<number> {
  const script = useScript(bench, children, [toolCallResponse('burn-1', 'burn', { iterations }), textResponse('done')])
  const t0 = performance.now()
  await Promise.all(Array.from({ length: children }, () => delegate(bench)))
  const elapsed = performance.now() - t0
  script.done()
  return elapsed
}

function delayFigure(total: IntervalHistogram, roundP99s: number[]): Figure {
  return {
    n: total.count,
    median: delayMs(total.percentile(50)),
    p99: delayMs(total.percentile(99)),
    min: delayMs(total.min),
    max: delayMs(total.max),
    mean: delayMs(total.mean),
    // The histogram keeps no raw samples; each round's own p99 stands in for them.
    samples: roundP99s,
  }
}

/** Each transport's S6 rounds back to back under one monitor, and each round's own p99. */
async function loopDelays(bench: BenchHost, rounds: number, children: number, iterations: number, advance: () => void): Promise<Figure> {
  // One monitor for the whole run of rounds: a re-enabled monitor would count the time it was
  // off as one huge delay.
  const total = loopMonitor()
  const p99s: number[] = []
  total.enable()
  for (let r = 0; r < rounds; r++) {
    const round = loopMonitor()
    round.enable()
    // Ticks before and after the batch (see loop-delay.ts).
    await loopTurns()
    await burnBatch(bench, children, iterations)
    await loopTurns()
    round.disable()
    p99s.push(delayMs(round.percentile(99)))
    advance()
  }
  total.disable()
  return delayFigure(total, p99s)
}

export const s5: Scenario = {
  ids: ['S5', 'S6'],
  label: 'S5/S6 CPU-bound module tools',
  units: (plan) => 1 + plan.cpu.rounds * (1 + LOCAL_MODES.length),
  async run(context): Promise<ScenarioResult[]> {
    const { warmup, children, burnMs, rounds } = context.plan.cpu
    const iterations = calibrate(burnMs)
    const threads = defaultThreads()
    const pool = { minThreads: threads, maxThreads: threads, childrenPerWorker: 1 }
    const hosts = LOCAL_MODES.map((mode) => ({ mode, bench: benchHost(mode, { pool }) }))
    // The same burns as bare piscina tasks: what this machine's cores give at best. Without
    // piscina (a dev dependency) there is no floor to judge the wall by.
    let bare: ParallelWork | undefined
    const walls: Record<LocalMode, number[]> = { inline: [], worker: [], process: [] }
    const floorWalls: number[] = []
    const delays = {} as Record<LocalMode, Figure>
    const advance = () => context.progress.advance(1)
    try {
      bare = await context.floor.parallelWork(threads)
      // Warm-up: every runner imports the module and optimizes its own code (a fresh thread or
      // process compiles the runner's for its first few hundred children), then the loop.
      for (const { bench } of hosts) {
        for (let done = 0; done < warmup; done += children) await burnBatch(bench, children, 0)
        await burnBatch(bench, children, iterations)
      }
      await bare?.batch(children, iterations)
      advance()
      // S5: the transports and the floor take turns batch by batch, so the machine's drift
      // over the scenario reaches each of them alike.
      for (let r = 0; r < rounds; r++) {
        for (const { mode, bench } of hosts) walls[mode].push(await burnBatch(bench, children, iterations))
        if (bare) floorWalls.push(await bare.batch(children, iterations))
        advance()
      }
      for (const { mode, bench } of hosts) delays[mode] = await loopDelays(bench, rounds, children, iterations, advance)
    } finally {
      await Promise.all([...hosts.map(({ bench }) => bench.host.close()), bare?.close()])
    }

    const floor = floorWalls.length > 0 ? figure(floorWalls, 'lower') : undefined
    const setup = { warmup, children, burnMsPerChild: burnMs, iterationsPerChild: iterations, rounds, steps: 2, pool }
    const inline = figure(walls.inline, 'lower')
    const worker = figure(walls.worker, 'lower')
    const proc = figure(walls.process, 'lower')
    const ratio = ratioOf(worker, inline) ?? Infinity
    const wallGoals = floor ? [ratioGoal('worker', 'wall <= 1.05 × floor', '<=', worker.median / floor.median, 1.05, floor.median)] : []
    const delayGoal = valueGoal('worker', 'p99 <= 10 ms', '<=', delays.worker.p99, 10, 10)
    return [
      {
        id: 'S5',
        title: `${children} children each running a module tool that burns ${burnMs} ms of CPU`,
        metric: `ms of wall time for the batch of ${children}`,
        unit: 'ms',
        better: 'lower',
        model: HOST_MODEL,
        setup,
        inline,
        worker,
        process: proc,
        floor,
        ratio,
        processRatio: processRatioOf({ inline, worker, process: proc }),
        goals: wallGoals,
        met: allMet(wallGoals),
        extra: {
          idealWorkerMs: (children * burnMs) / Math.min(threads, availableParallelism()),
          ...(floor ? { floorRatio: floor.median / inline.median, processFloorRatio: proc.median / floor.median } : {}),
        },
      },
      {
        id: 'S6',
        title: "host event-loop delay during batches of S5's workload",
        metric: `ms of event-loop delay (monitorEventLoopDelay, ${RESOLUTION_MS} ms resolution, period subtracted)`,
        unit: 'ms',
        better: 'lower',
        model: HOST_MODEL,
        setup: { ...setup, resolutionMs: RESOLUTION_MS, samplesAre: 'per-round p99 (the histogram keeps no raw samples)' },
        inline: delays.inline,
        worker: delays.worker,
        process: delays.process,
        ratio: ratioOf(delays.worker, delays.inline),
        processRatio: processRatioOf(delays),
        goals: [delayGoal],
        met: allMet([delayGoal]),
      },
    ]
  },
}
