/** The shape of a scenario and the helpers that turn samples into a result row. */
import type { ScenarioId } from '../args.js'
import type { Floor } from '../floor.js'
import type { Plan } from '../plan.js'
import type { Progress } from '../progress.js'
import { round, summarize, type Direction } from '../stats.js'
import type { Figure, Goal, ScenarioResult } from '../types.js'

export interface ScenarioContext {
  plan: Plan
  progress: Progress
  /** The bare piscina round trip, measured once and shared by S1-S3. */
  floor: Floor
}

export interface Scenario {
  /** The rows this scenario produces (S5's run also yields S6's row). */
  ids: readonly ScenarioId[]
  label: string
  /** Progress units the scenario will report, for the bar's total. */
  units(plan: Plan): number
  run(context: ScenarioContext): Promise<ScenarioResult[]>
}

export function figure(samples: readonly number[], better: Direction): Figure {
  return { ...summarize(samples, better), samples: samples.map((x) => round(x)) }
}

export function ratioOf(worker: Figure, inline: Figure | null): number | null {
  return inline && inline.median !== 0 ? worker.median / inline.median : null
}

/** A goal on a figure in the scenario's unit; `line` places it on the chart. */
export function valueGoal(text: string, comparison: Goal['comparison'], figure: number, threshold: number, line?: number): Goal {
  return { text, figure, threshold, comparison, kind: 'value', ...(line === undefined ? {} : { line }) }
}

/** A goal on worker / inline; on the chart it sits at the threshold times the inline median. */
export function ratioGoal(text: string, comparison: Goal['comparison'], ratio: number, threshold: number, inlineMedian: number): Goal {
  return { text, figure: ratio, threshold, comparison, kind: 'ratio', line: threshold * inlineMedian }
}

export function isMet(goal: Goal): boolean {
  return goal.comparison === '<=' ? goal.figure <= goal.threshold : goal.figure >= goal.threshold
}
