/** The shape of a scenario and the helpers that turn samples into a result row. */
import type { ScenarioId } from '../args.js'
import type { ChannelFloor } from '../channel-floor.js'
import type { Floor } from '../floor.js'
import type { Plan } from '../plan.js'
import type { Progress } from '../progress.js'
import type { Figure, Goal, ScenarioResult } from '../types.js'

export interface ScenarioContext {
  plan: Plan
  progress: Progress
  /** The bare piscina round trip, measured once and shared by S1-S3. */
  floor: Floor
  /** The bare persistent channel per thread, measured once and shared by S1-S3. */
  channelFloor: ChannelFloor
}

export interface Scenario {
  /** The rows this scenario produces (S5's run also yields S6's row, S9's also S9m's). */
  ids: readonly ScenarioId[]
  label: string
  /** Progress units the scenario will report, for the bar's total. */
  units(plan: Plan): number
  run(context: ScenarioContext): Promise<ScenarioResult[]>
}

export function ratioOf(worker: Figure, inline: Figure | null): number | null {
  return inline && inline.median !== 0 ? worker.median / inline.median : null
}

/** A goal on a figure in the scenario's unit; `line` places it on the chart. */
export function valueGoal(text: string, comparison: Goal['comparison'], figure: number, threshold: number, line?: number): Goal {
  return { text, figure, threshold, comparison, kind: 'value', met: meets(comparison, figure, threshold), ...(line === undefined ? {} : { line }) }
}

/**
 * A goal on the worker figure over a reference (inline, the floor, the ideal). With the
 * reference's value in the scenario's unit it is drawn at threshold × that value; without, it is
 * on another quantity (CPU, say) and not drawn.
 */
export function ratioGoal(text: string, comparison: Goal['comparison'], ratio: number, threshold: number, reference?: number): Goal {
  return { text, figure: ratio, threshold, comparison, kind: 'ratio', met: meets(comparison, ratio, threshold), ...(reference === undefined ? {} : { line: threshold * reference }) }
}

function meets(comparison: Goal['comparison'], figure: number, threshold: number): boolean {
  return comparison === '<=' ? figure <= threshold : figure >= threshold
}

/** A row meets its goals when it meets every one. */
export function allMet(goals: readonly Goal[]): boolean {
  return goals.every((goal) => goal.met)
}

/** Whole-process CPU time (user + system, every thread) since `since`, in µs. */
export function cpuSince(since: NodeJS.CpuUsage): number {
  const { user, system } = process.cpuUsage(since)
  return user + system
}
