/** What a scenario reports: the shape of the table rows, the chart and the JSON file. */
import type { PlanName, ScenarioId } from './args.js'
import type { MachineInfo } from './measure/machine.js'
import type { Direction, Summary } from './measure/stats.js'

/**
 * Where children run: the host's `isolation`, or `remote`, the BullMQ transport with worker nodes
 * (two node processes on this machine, over Redis). Figures are in this order, from the same run.
 */
export type Mode = 'inline' | 'worker' | 'process' | 'remote'

export const MODES: readonly Mode[] = ['inline', 'worker', 'process', 'remote']

/** The transports every scenario measures; `remote` needs Redis and is measured where it applies (REMOTE_IDS). */
export type LocalMode = Exclude<Mode, 'remote'>

export const LOCAL_MODES: readonly LocalMode[] = ['inline', 'worker', 'process']

/** The rows with a remote figure (S9's run also yields S9m's, S9u's S9um's); every other row's remote cell is n/a. */
export const REMOTE_IDS: readonly ScenarioId[] = ['S1', 'S2', 'S3', 'S4', 'S8', 'S9', 'S9m', 'S9u', 'S9um']

/** The isolating transports: goals are judged on their figures (inline is the reference they are read against). */
export type Isolated = Exclude<Mode, 'inline'>

export type Unit = 'ms' | 'delegations/s' | 'MB'

/** A summary plus the raw samples it came from (kept for the JSON file). */
export interface Figure extends Summary {
  samples: number[]
}

export interface Goal {
  /** The transport whose median the goal is judged on. */
  mode: Isolated
  /** As the brief states it, e.g. `p50 <= 0.5 ms`. */
  text: string
  /** The number the goal is judged on: in the scenario's unit for `value` goals, a ratio for `ratio` goals. */
  figure: number
  threshold: number
  comparison: '<=' | '>='
  /** `ratio` goals compare the transport's figure with a reference (inline, worker, the floor, the ideal); `value` goals are a figure in the scenario's unit. */
  kind: 'value' | 'ratio'
  met: boolean
  /** Where the goal sits on the chart, in the scenario's own unit; absent when the goal is on another quantity (CPU, event-loop delay). */
  line?: number
}

/**
 * A secondary figure per variant: inline's (when it can run), the worker's, the process
 * transport's (`null` where this machine cannot read its runners, see proc.ts), the remote
 * transport's (absent when the run had no remote column; `null` where its nodes cannot be read)
 * and the module-model worker's (where measured).
 */
export interface ByVariant {
  inline: Figure | null
  worker: Figure
  process: Figure | null
  remote?: Figure | null
  workerModuleModel?: Figure
}

/** Secondary figures. The named ones are shown in the notes under the table; any other key goes to the JSON only. */
export interface Extra {
  /**
   * CPU time per delegation, in µs: each round's CPU over its delegations, the host process's
   * every thread plus, for the process transport, its runner processes, and for the remote
   * transport its node processes (Redis's own is `redisCpuUs*`, apart).
   */
  cpuUsPerDelegation?: ByVariant
  /** CPU time per streamed chunk, in µs, counted the same way. */
  cpuUsPerChunk?: ByVariant
  /** The Redis server's CPU per delegation during the remote rounds, in µs (when its process can be read: same machine, /proc). */
  redisCpuUsPerDelegation?: Figure
  /** The Redis server's CPU per streamed chunk during the remote batches, in µs. */
  redisCpuUsPerChunk?: Figure
  /** The host's event-loop delay during each batch, in ms: each round's p99 and max. */
  eventLoopDelayMs?: { p99: ByVariant; max: ByVariant }
  /** The wall-time medians over the ideal wall time (S9); remote only when measured. */
  wallOverIdeal?: Record<LocalMode, number> & { remote?: number }
  [key: string]: unknown
}

export interface ScenarioResult {
  id: ScenarioId
  title: string
  /** What one sample is. */
  metric: string
  unit: Unit
  better: Direction
  /** Which model the children use: it decides how many host round trips a step costs. */
  model: string
  /** Counts and pool settings, so the figures can be reproduced. */
  setup: Record<string, unknown>
  /** `null` when the scenario cannot run inline (see `notApplicable`). */
  inline: Figure | null
  worker: Figure
  /** `null` when the process transport's figure cannot be measured on this machine (see `notApplicable`). */
  process: Figure | null
  /**
   * The BullMQ transport on two worker node processes: absent when the run had no remote column
   * (`--no-remote`, no Redis, no bullmq), `null` on a row it does not apply to (see `notApplicable`).
   */
  remote?: Figure | null
  /** Why a transport's figure is `null`. */
  notApplicable?: Partial<Record<Mode, string>>
  /** The bare piscina task measured in the same run (S1-S3), or the same CPU burns as bare piscina tasks (S5). */
  floor?: Figure
  /** The bare persistent channel per thread, messages coalesced per turn, measured in the same run (S1-S3). */
  channelFloor?: Figure
  /** A bare BullMQ job round trip on the same Redis, measured in the same run (S1-S3, with the remote column). */
  bullmqFloor?: Figure
  /** The worker figure again with a module model: no host round trip per model step (S2, S3). */
  workerModuleModel?: Figure
  /** A value the figures are read against (S9: the ideal wall time), drawn on the chart. */
  reference?: { label: string; value: number }
  /** worker median / inline median; `null` when there is no inline figure. */
  ratio: number | null
  /** The process median over the inline and over the worker median; `null` where either side has no figure. */
  processRatio: { inline: number | null; worker: number | null }
  /** With a remote figure: its median over the worker's and over the BullMQ floor's; `null` where either side has none. */
  remoteRatio?: { worker: number | null; floor: number | null }
  /** Each with the transport it is judged on; none for a row that only reports (S10). */
  goals: Goal[]
  /** Every goal met, on whichever transport (true for a row without goals). */
  met: boolean
  /**
   * An A/B row (G2, G3, O3, O9): the worker transport with a feature on (the `worker` figure)
   * against off (`offFigure`), same run, rounds taking turns; `ratio` is on over off (medians),
   * `cpuRatio` the same for the host's CPU per unit of work.
   */
  ab?: { on: string; off: string; offFigure: Figure; ratio: number; cpuRatio: number }
  /** Secondary figures (e.g. CPU per delegation, heap vs RSS, per-delegation latency in throughput runs). */
  extra?: Extra
}

/** How the remote column was measured, or why it was not. */
export type RemoteInfo =
  | {
      measured: true
      /** Where Redis was (never its password). */
      redis: string
      /** This run's own queue: no other run's jobs are seen. */
      queue: string
      /** The Redis server's pid when its CPU could be read (same machine, /proc); else null. */
      redisPid: number | null
      /**
       * Every worker node process the run started (`subagent-worker node`), two at a time, each
       * with its threads (--max-threads) and children per thread (--children-per-worker); a row's
       * setup.remote names the ones it ran on.
       */
      nodes: Array<{ id: string; pid: number; maxThreads: number; childrenPerWorker: number }>
    }
  | { measured: false; reason: string }

export interface BenchReport {
  tool: 'subagent-worker bench'
  version: string
  startedAt: string
  durationMs: number
  argv: string[]
  plan: PlanName
  machine: MachineInfo
  /** Absent when no selected scenario has a remote figure. */
  remote?: RemoteInfo
  scenarios: ScenarioResult[]
}
