/**
 * The stdout report: a table of figures (one row per scenario, every transport side by side with
 * the floors and the ratios), a table of goals (one row per goal, each on its own transport), and
 * notes. Goals get their own table because a row may carry goals on two transports: in one
 * line with the figures they made the table too wide to read. The remote column, its floor and
 * its ratio are there only when the run measured them.
 */
import { table, type Style } from '../../terminal/format.js'
import { describeMachine } from '../measure/machine.js'
import { NODES } from '../remote.js'
import { LOCAL_MODES, MODES, type BenchReport, type ByVariant, type Figure, type Goal, type Mode, type ScenarioResult, type Unit } from '../types.js'
import type { PlanName } from '../args.js'

/** What the machine line adds for a plan that is not the full one. */
const PLAN_NOTES: Record<PlanName, string> = {
  full: '',
  quick: '  (--quick: fewer samples and children, noisier figures)',
  smoke: '  (--smoke: the least that computes every figure; the figures say nothing)',
}

export function formatValue(value: number, unit: Unit): string {
  switch (unit) {
    case 'ms':
      return `${value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(3)} ms`
    case 'delegations/s':
      return `${Math.round(value).toLocaleString('en-US')}/s`
    case 'MB':
      return `${value.toFixed(3)} MB`
  }
}

/** `median (p99 x)`: the tail is always shown beside the median, in the same unit. */
function cell(figure: Figure | null | undefined, unit: Unit): string {
  if (!figure) return '-'
  const p99 = formatValue(figure.p99, unit).replace(/ ?(ms|MB|\/s)$/, '')
  return `${formatValue(figure.median, unit)} (p99 ${p99})`
}

const ratioCell = (ratio: number | null) => (ratio === null ? '-' : `${ratio.toFixed(2)}×`)

/** The number a goal is judged on: a ratio as `1.23×`, a value in the scenario's unit. */
export function goalFigure(goal: Goal, unit: Unit): string {
  return goal.kind === 'ratio' ? `${goal.figure.toPrecision(3)}×` : formatValue(goal.figure, unit)
}

/** Whether the run measured the remote column: some row has a remote cell (a figure, or n/a). */
export function hasRemote(report: BenchReport): boolean {
  return report.scenarios.some((r) => r.remote !== undefined)
}

/** The transports the run's tables show, in column order. */
export function modesOf(report: BenchReport): readonly Mode[] {
  return hasRemote(report) ? MODES : LOCAL_MODES
}

export function renderTable(report: BenchReport, style: Style): string {
  const remote = hasRemote(report)
  // The A/B rows' ratio (feature on over off) gets a column only when the run has such a row.
  const ab = report.scenarios.some((r) => r.ab)
  const rows = report.scenarios.map((r) => [
    style.bold(r.id),
    ...modesOf(report).map((mode) => (r[mode] ? cell(r[mode], r.unit) : 'n/a')),
    r.floor ? cell(r.floor, r.unit) : '',
    r.channelFloor ? cell(r.channelFloor, r.unit) : '',
    ...(remote ? [r.bullmqFloor ? cell(r.bullmqFloor, r.unit) : ''] : []),
    ratioCell(r.ratio),
    ratioCell(r.processRatio.worker),
    ...(remote ? [ratioCell(r.remoteRatio?.worker ?? null)] : []),
    ...(ab ? [ratioCell(r.ab?.ratio ?? null)] : []),
  ])
  const head = ['scenario', ...modesOf(report), 'piscina floor', 'channel floor', ...(remote ? ['bullmq floor'] : []), 'worker/inline', 'process/worker', ...(remote ? ['remote/worker'] : []), ...(ab ? ['on/off'] : [])]
  return table(head, rows, style)
}

/** One line per goal, in the scenarios' order, worker's before process's. */
export function renderGoals(report: BenchReport, style: Style): string {
  const rows = report.scenarios.flatMap((r) =>
    r.goals.map((goal) => {
      const paint = goal.met ? style.green : style.red
      return [style.bold(r.id), goal.mode, goal.text, goalFigure(goal, r.unit), paint(goal.met ? 'yes' : 'NO')]
    }),
  )
  if (rows.length === 0) return style.dim('No goals: the selected scenarios only report.')
  return table(['scenario', 'transport', 'goal', 'figure', 'met?'], rows, style)
}

function micros(value: number): string {
  return `${value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(2)} µs`
}

/**
 * `inline a, worker b, process c, remote d, worker with a module model e`: the medians of a
 * secondary figure; `redis`, the Redis server's own share of the remote figure, goes beside it.
 */
function byVariant(figures: ByVariant, format: (value: number) => string, modes: readonly Mode[], redis?: Figure): string {
  const parts = modes.map((mode) => {
    const text = `${mode} ${figures[mode] ? format(figures[mode].median) : 'n/a'}`
    return mode === 'remote' && redis ? `${text} (and the Redis server's own ${format(redis.median)})` : text
  })
  if (figures.workerModuleModel) parts.push(`worker with a module model ${format(figures.workerModuleModel.median)}`)
  return parts.join(', ')
}

/** The secondary figures a row carries (CPU, event-loop delay, wall over ideal), as sentences for its note. */
function extraNotes(r: ScenarioResult, modes: readonly Mode[]): string {
  const extra = r.extra ?? {}
  const notes: string[] = []
  if (extra.wallOverIdeal) {
    const ratios = extra.wallOverIdeal as Partial<Record<Mode, number>>
    notes.push(`Wall / ideal: ${modes.map((mode) => `${mode} ${ratios[mode] === undefined ? 'n/a' : `${ratios[mode]!.toFixed(2)}×`}`).join(', ')}.`)
  }
  if (extra.cpuUsPerDelegation) notes.push(`CPU per delegation (host and runner processes): ${byVariant(extra.cpuUsPerDelegation, micros, modes, extra.redisCpuUsPerDelegation)}.`)
  if (extra.cpuUsPerChunk) notes.push(`CPU per chunk (host and runner processes): ${byVariant(extra.cpuUsPerChunk, micros, modes, extra.redisCpuUsPerChunk)}.`)
  if (extra.eventLoopDelayMs) {
    const { p99, max } = extra.eventLoopDelayMs
    const ms = (figure: Figure | null | undefined) => (figure ? figure.median.toFixed(1) : 'n/a')
    notes.push(`Host event-loop delay p99 / max: ${modes.map((mode) => `${mode} ${ms(p99[mode])} / ${ms(max[mode])} ms`).join(', ')}.`)
  }
  return notes.map((note) => ` ${note}`).join('')
}

/** An A/B row's two arms: what on and off are, off's figure, and the ratios of the medians. */
function abNote(r: ScenarioResult): string {
  if (!r.ab) return ''
  const { on, off, offFigure, ratio, cpuRatio } = r.ab
  return ` An A/B row on the worker transport (inline and process n/a), same run, rounds taking turns. On (the worker cell): ${on}. Off: ${off}, ${cell(offFigure, r.unit)}. On/off ${ratioCell(ratio)}; host CPU per unit of work on/off ${ratioCell(cpuRatio)}.`
}

const capitalized = (mode: Mode) => `${mode[0]!.toUpperCase()}${mode.slice(1)}`

/** What the remote column is, or why the run has none (when a selected row would have had one). */
function remoteNote(report: BenchReport): string[] {
  const remote = report.remote
  if (!remote) return []
  if (!remote.measured) return [`remote: not measured, ${remote.reason}.`]
  return [
    `remote = the BullMQ transport: ${NODES} worker node processes on this machine (subagent-worker node), started for each scenario with the worker column's pool spread over them (half its threads each, its slots shared out: --max-threads and --children-per-worker are in each row's setup in the JSON), jobs and frames over Redis at ${remote.redis} (queue ${remote.queue}, this run's own). Its CPU figures count the node processes whole as runners; the Redis server's CPU is given apart${remote.redisPid === null ? ' where it can be read (not here: Redis is not a process of this machine that /proc shows)' : ''}. remote/worker is a ratio of the medians.`,
    `bullmq floor (S1-S3): a bare BullMQ job round trip on the same Redis, no library: Queue.add (the transport's job options), a Worker in each of ${NODES} processes of its own (the scenario's node concurrency) whose processor publishes a reply on Redis pub/sub, awaited by the bench; S1/S2 one at a time, S3 round trips per second with as many in flight.`,
  ]
}

export function renderNotes(report: BenchReport, style: Style): string {
  const modes = modesOf(report)
  const lines = report.scenarios.map((r) => {
    const moduleModel = r.workerModuleModel ? ` Worker with a module model (no RPC per step): ${cell(r.workerModuleModel, r.unit)}.` : ''
    const notApplicable = modes.flatMap((mode) => (r.notApplicable?.[mode] ? [` ${capitalized(mode)}: not applicable, ${r.notApplicable[mode]}.`] : [])).join('')
    const noGoal = r.goals.length === 0 ? ' Reported, no goal.' : ''
    return `  ${r.id}  ${r.title}; one sample = ${r.metric}.${moduleModel}${abNote(r)}${extraNotes(r, modes)}${notApplicable}${noGoal}`
  })
  const models = [...new Set(report.scenarios.map((r) => r.model))]
  return [
    style.dim(`Machine: ${describeMachine(report.machine)}${PLAN_NOTES[report.plan]}.`),
    style.dim(`Cells are median (p99); p99 is the bad tail: the slowest 1 % for times and sizes, the lowest 1 % for rates. worker/inline and process/worker are ratios of the medians.`),
    style.dim(
      `Each goal is judged on its transport's median; figure is the number it is judged on (× is a ratio: to inline, worker, the floor or the ideal, as the goal says). CPU figures are medians of each round's CPU: the host process's every thread plus, for process, its runner processes${hasRemote(report) ? ', for remote, its node processes' : ''} (read from /proc); event-loop delays are the host's, medians of each round's p99 and max.`,
    ),
    style.dim(
      `Floors = the same work with no library, same thread count, same run. piscina floor: S1-S3 a bare piscina task with a transferred MessagePort and one message back (same pool settings); S5 the same CPU burns as bare piscina tasks. channel floor (S1-S3): one persistent channel per plain worker thread, small messages coalesced into one postMessage per thread per event-loop turn and echoed back the same way; S1/S2 one round trip at a time, S3 messages echoed per second with as many in flight.`,
    ),
    ...remoteNote(report).map((line) => style.dim(line)),
    style.dim(`Model: ${models.join('; ')}.`),
    ...lines.map((line) => style.dim(line)),
  ].join('\n')
}
