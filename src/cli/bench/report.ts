/** The stdout table: one row per scenario, the figures a reader needs to judge its goals at a glance. */
import { table, type Style } from '../format.js'
import { describeMachine } from './machine.js'
import type { BenchReport, ByVariant, Figure, Goal, ScenarioResult, Unit } from './types.js'

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

/** The number a goal is judged on: a ratio as `1.23×`, a value in the scenario's unit. */
export function goalFigure(goal: Goal, unit: Unit): string {
  return goal.kind === 'ratio' ? `${goal.figure.toPrecision(3)}×` : formatValue(goal.figure, unit)
}

/** `yes (a; b)` or `NO (a; b)`: the verdict in the row's colour, each goal's figure in its own. */
function verdict(result: ScenarioResult, style: Style): string {
  const paint = (met: boolean) => (met ? style.green : style.red)
  const figures = result.goals.map((goal) => paint(goal.met)(goalFigure(goal, result.unit))).join(paint(result.met)('; '))
  return `${paint(result.met)(`${result.met ? 'yes' : 'NO'} (`)}${figures}${paint(result.met)(')')}`
}

export function renderTable(report: BenchReport, style: Style): string {
  const rows = report.scenarios.map((r) => [
    style.bold(r.id),
    r.inline ? cell(r.inline, r.unit) : 'n/a',
    cell(r.worker, r.unit),
    r.floor ? cell(r.floor, r.unit) : '',
    r.channelFloor ? cell(r.channelFloor, r.unit) : '',
    r.ratio === null ? '-' : `${r.ratio.toFixed(2)}×`,
    r.goals.map((goal) => goal.text).join('; '),
    verdict(r, style),
  ])
  return table(['scenario', 'inline', 'worker', 'piscina floor', 'channel floor', 'ratio', 'goals (worker)', 'met?'], rows, style)
}

function micros(value: number): string {
  return `${value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(2)} µs`
}

/** `inline a, worker b, worker with a module model c`: the medians of a secondary figure. */
function byVariant(figures: ByVariant, format: (value: number) => string): string {
  const parts = [`inline ${figures.inline ? format(figures.inline.median) : 'n/a'}`, `worker ${format(figures.worker.median)}`]
  if (figures.workerModuleModel) parts.push(`worker with a module model ${format(figures.workerModuleModel.median)}`)
  return parts.join(', ')
}

/** The secondary figures a row carries (CPU, event-loop delay, wall over ideal), as sentences for its note. */
function extraNotes(r: ScenarioResult): string {
  const extra = r.extra ?? {}
  const notes: string[] = []
  if (extra.wallOverIdeal) notes.push(`Wall / ideal: inline ${extra.wallOverIdeal.inline.toFixed(2)}×, worker ${extra.wallOverIdeal.worker.toFixed(2)}×.`)
  if (extra.cpuUsPerDelegation) notes.push(`CPU per delegation (whole process): ${byVariant(extra.cpuUsPerDelegation, micros)}.`)
  if (extra.cpuUsPerChunk) notes.push(`CPU per chunk (whole process): ${byVariant(extra.cpuUsPerChunk, micros)}.`)
  if (extra.eventLoopDelayMs) {
    const { p99, max } = extra.eventLoopDelayMs
    const ms = (figure: Figure | null) => (figure ? figure.median.toFixed(1) : 'n/a')
    notes.push(`Host event-loop delay p99 / max: inline ${ms(p99.inline)} / ${ms(max.inline)} ms, worker ${ms(p99.worker)} / ${ms(max.worker)} ms.`)
  }
  return notes.map((note) => ` ${note}`).join('')
}

export function renderNotes(report: BenchReport, style: Style): string {
  const lines = report.scenarios.map((r) => {
    const moduleModel = r.workerModuleModel ? ` Worker with a module model (no RPC per step): ${cell(r.workerModuleModel, r.unit)}.` : ''
    return `  ${r.id}  ${r.title}; one sample = ${r.metric}.${moduleModel}${extraNotes(r)}${r.inlineNote ? ` Inline: ${r.inlineNote}.` : ''}`
  })
  const models = [...new Set(report.scenarios.map((r) => r.model))]
  return [
    style.dim(`Machine: ${describeMachine(report.machine)}${report.quick ? '  (--quick: fewer samples, noisier figures)' : ''}.`),
    style.dim(`Cells are median (p99); p99 is the bad tail: the slowest 1 % for times and sizes, the lowest 1 % for rates. Ratio = worker / inline medians.`),
    style.dim(`Goals are judged on the worker medians; met? gives each goal's figure in order (× is a ratio: to inline, the floor or the ideal, as the goal says). CPU figures are medians of each round's whole-process CPU (every thread); event-loop delays are medians of each round's p99 and max.`),
    style.dim(
      `Floors = the same work with no library, same thread count, same run. piscina floor: S1-S3 a bare piscina task with a transferred MessagePort and one message back (same pool settings); S5 the same CPU burns as bare piscina tasks. channel floor (S1-S3): one persistent channel per plain worker thread, small messages coalesced into one postMessage per thread per event-loop turn and echoed back the same way; S1/S2 one round trip at a time, S3 messages echoed per second with as many in flight.`,
    ),
    style.dim(`Model: ${models.join('; ')}.`),
    ...lines.map((line) => style.dim(line)),
  ].join('\n')
}
