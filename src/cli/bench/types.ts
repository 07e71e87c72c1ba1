/** What a scenario reports: the shape of the table rows, the chart and the JSON file. */
import type { ScenarioId } from './args.js'
import type { MachineInfo } from './machine.js'
import type { Direction, Summary } from './stats.js'

export type Mode = 'inline' | 'worker'

export type Unit = 'ms' | 'delegations/s' | 'MB'

/** A summary plus the raw samples it came from (kept for the JSON file). */
export interface Figure extends Summary {
  samples: number[]
}

export interface Goal {
  /** As the brief states it, e.g. `p50 <= 0.5 ms`. */
  text: string
  /** The number the goal is judged on: in the scenario's unit for `value` goals, a ratio for `ratio` goals. */
  figure: number
  threshold: number
  comparison: '<=' | '>='
  /** `ratio` goals compare the worker figure with a reference (inline, the floor, the ideal); `value` goals are a figure in the scenario's unit. */
  kind: 'value' | 'ratio'
  met: boolean
  /** Where the goal sits on the chart, in the scenario's own unit; absent when the goal is on another quantity (CPU, event-loop delay). */
  line?: number
}

/** A secondary figure per variant: the worker's, inline's (when it can run) and the module-model worker's (where measured). */
export interface ByVariant {
  inline: Figure | null
  worker: Figure
  workerModuleModel?: Figure
}

/** Secondary figures. The named ones are shown in the notes under the table; any other key goes to the JSON only. */
export interface Extra {
  /** Whole-process CPU time (every thread) per delegation, in µs: each round's CPU over its delegations. */
  cpuUsPerDelegation?: ByVariant
  /** Whole-process CPU time per streamed chunk, in µs. */
  cpuUsPerChunk?: ByVariant
  /** The host's event-loop delay during each batch, in ms: each round's p99 and max. */
  eventLoopDelayMs?: { p99: ByVariant; max: ByVariant }
  /** The wall-time medians over the ideal wall time (S9). */
  wallOverIdeal?: { inline: number; worker: number }
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
  /** `null` when the scenario cannot run inline (see `inlineNote`). */
  inline: Figure | null
  inlineNote?: string
  worker: Figure
  /** The bare piscina task measured in the same run (S1-S3), or the same CPU burns as bare piscina tasks (S5). */
  floor?: Figure
  /** The bare persistent channel per thread, messages coalesced per turn, measured in the same run (S1-S3). */
  channelFloor?: Figure
  /** The worker figure again with a module model: no host round trip per model step (S2, S3). */
  workerModuleModel?: Figure
  /** A value the figures are read against (S9: the ideal wall time), drawn on the chart. */
  reference?: { label: string; value: number }
  /** worker median / inline median; `null` when there is no inline figure. */
  ratio: number | null
  goals: Goal[]
  /** Every goal met. */
  met: boolean
  /** Secondary figures (e.g. CPU per delegation, heap vs RSS, per-delegation latency in throughput runs). */
  extra?: Extra
}

export interface BenchReport {
  tool: 'subagent-worker bench'
  version: string
  startedAt: string
  durationMs: number
  argv: string[]
  quick: boolean
  machine: MachineInfo
  scenarios: ScenarioResult[]
}
