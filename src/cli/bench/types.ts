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
  /** The number the goal is judged on, in `unit` (or a ratio for ratio goals). */
  figure: number
  threshold: number
  comparison: '<=' | '>='
  /** `ratio` goals compare worker with inline; `value` goals a figure in the scenario's unit. */
  kind: 'value' | 'ratio'
  /** Where the goal sits in the scenario's own unit (for a ratio or overhead goal, relative to the inline median), for the chart. */
  line?: number
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
  /** The bare piscina round trip measured in the same run (S1-S3). */
  floor?: Figure
  /** The worker figure again with a module model: no host round trip per model step (S2, S3). */
  workerModuleModel?: Figure
  /** worker median / inline median; `null` when there is no inline figure. */
  ratio: number | null
  goal: Goal
  met: boolean
  /** Secondary figures (e.g. heap vs RSS, per-delegation latency in throughput runs). */
  extra?: Record<string, unknown>
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
