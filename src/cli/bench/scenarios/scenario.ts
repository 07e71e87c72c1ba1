/** The shape of a scenario and the helpers that turn samples into a result row. */
import type { ScenarioId } from '../args.js'
import type { BullmqFloor } from '../floors/bullmq-floor.js'
import type { ChannelFloor } from '../floors/channel-floor.js'
import type { Floor } from '../floors/floor.js'
import type { Variant } from '../harness.js'
import type { Plan } from '../plan.js'
import type { Progress } from '../report/progress.js'
import type { RemoteRig } from '../remote.js'
import type { Figure, Goal, Isolated, ScenarioResult } from '../types.js'

export interface ScenarioContext {
  plan: Plan
  progress: Progress
  /** The bare piscina round trip, measured once and shared by S1-S3. */
  floor: Floor
  /** The bare persistent channel per thread, measured once and shared by S1-S3. */
  channelFloor: ChannelFloor
  /** The remote column's nodes and its floor; absent when the run has no remote column. */
  remote?: { rig: RemoteRig; floor: BullmqFloor }
}

export interface Scenario {
  /** The rows this scenario produces (S5's run also yields S6's row, S9's also S9m's). */
  ids: readonly ScenarioId[]
  label: string
  /** Progress units the scenario will report, for the bar's total. */
  units(plan: Plan): number
  /** The units the remote column adds, when the run has it (none by default). */
  remoteUnits?(plan: Plan): number
  run(context: ScenarioContext): Promise<ScenarioResult[]>
}

/** `figure`'s median over `reference`'s; `null` when either is missing. */
export function ratioOf(figure: Figure | null, reference: Figure | null): number | null {
  return figure && reference && reference.median !== 0 ? figure.median / reference.median : null
}

/** The process column's ratios: to inline (what isolation costs in all) and to worker (what a process costs over a thread). */
export function processRatioOf(figures: { inline: Figure | null; worker: Figure; process: Figure | null }): ScenarioResult['processRatio'] {
  return { inline: ratioOf(figures.process, figures.inline), worker: ratioOf(figures.process, figures.worker) }
}

/** The variants a scenario measures: `local`, and remote after them when the run has a remote column. */
export function withRemote<V extends Variant>(context: ScenarioContext, local: readonly V[]): Array<V | 'remote'> {
  return context.remote ? [...local, 'remote'] : [...local]
}

/**
 * A row's remote fields: its figure, its ratios (to the worker, to the BullMQ floor), the floor
 * where the row has one, and the nodes in its setup; nothing when the run has no remote column.
 */
export function remoteFields(
  context: ScenarioContext,
  figures: { worker: Figure | null; remote: Figure | undefined },
  floor?: Figure,
): Pick<ScenarioResult, 'remote' | 'remoteRatio' | 'bullmqFloor'> {
  if (!context.remote || !figures.remote) return {}
  return {
    remote: figures.remote,
    ...(floor ? { bullmqFloor: floor } : {}),
    remoteRatio: { worker: ratioOf(figures.remote, figures.worker), floor: floor ? ratioOf(figures.remote, floor) : null },
  }
}

/** A row's setup with the remote column's nodes, when it has one. */
export function setupWithRemote(context: ScenarioContext, setup: Record<string, unknown>): Record<string, unknown> {
  return context.remote ? { ...setup, remote: context.remote.rig.setup() } : setup
}

/** A goal on `mode`'s figure in the scenario's unit; `line` places it on the chart. */
export function valueGoal(mode: Isolated, text: string, comparison: Goal['comparison'], figure: number, threshold: number, line?: number): Goal {
  return { mode, text, figure, threshold, comparison, kind: 'value', met: meets(comparison, figure, threshold), ...(line === undefined ? {} : { line }) }
}

/**
 * A goal on `mode`'s figure over a reference (inline, worker, the floor, the ideal). With the
 * reference's value in the scenario's unit it is drawn at threshold × that value; without, it is
 * on another quantity (CPU, say) and not drawn.
 */
export function ratioGoal(mode: Isolated, text: string, comparison: Goal['comparison'], ratio: number, threshold: number, reference?: number): Goal {
  return { mode, text, figure: ratio, threshold, comparison, kind: 'ratio', met: meets(comparison, ratio, threshold), ...(reference === undefined ? {} : { line: threshold * reference }) }
}

function meets(comparison: Goal['comparison'], figure: number, threshold: number): boolean {
  return comparison === '<=' ? figure <= threshold : figure >= threshold
}

/** A row meets its goals when it meets every one, on whichever transport. */
export function allMet(goals: readonly Goal[]): boolean {
  return goals.every((goal) => goal.met)
}
