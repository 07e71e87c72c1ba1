/** The stdout table: one row per scenario, the figures a reader needs to judge a goal at a glance. */
import { table, type Style } from '../format.js'
import { describeMachine } from './machine.js'
import type { BenchReport, Figure, Goal, ScenarioResult, Unit } from './types.js'

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

function goalFigure(goal: Goal, result: ScenarioResult): string {
  return goal.kind === 'ratio' ? `${goal.figure.toPrecision(4)}×` : formatValue(goal.figure, result.unit)
}

export function renderTable(report: BenchReport, style: Style): string {
  const rows = report.scenarios.map((r) => [
    style.bold(r.id),
    r.inline ? cell(r.inline, r.unit) : 'n/a',
    cell(r.worker, r.unit),
    r.floor ? cell(r.floor, r.unit) : '',
    r.ratio === null ? '-' : `${r.ratio.toFixed(2)}×`,
    r.goal.text,
    r.met ? style.green(`yes (${goalFigure(r.goal, r)})`) : style.red(`NO (${goalFigure(r.goal, r)})`),
  ])
  return table(['scenario', 'inline', 'worker', 'floor', 'ratio', 'goal (worker)', 'met?'], rows, style)
}

export function renderNotes(report: BenchReport, style: Style): string {
  const lines = report.scenarios.map((r) => {
    const moduleModel = r.workerModuleModel ? ` Worker with a module model (no RPC per step): ${cell(r.workerModuleModel, r.unit)}.` : ''
    return `  ${r.id}  ${r.title}; one sample = ${r.metric}.${moduleModel}${r.inlineNote ? ` Inline: ${r.inlineNote}.` : ''}`
  })
  const models = [...new Set(report.scenarios.map((r) => r.model))]
  return [
    style.dim(`Machine: ${describeMachine(report.machine)}${report.quick ? '  (--quick: fewer samples, noisier figures)' : ''}.`),
    style.dim(`Cells are median (p99); p99 is the bad tail: the slowest 1 % for times and sizes, the lowest 1 % for rates. Ratio = worker / inline medians.`),
    style.dim(`floor = the same work with no library, same pool settings, same run: S1-S3 a bare piscina task with a transferred MessagePort and one message back; S5 the same CPU burns as bare piscina tasks.`),
    style.dim(`Model: ${models.join('; ')}.`),
    ...lines.map((line) => style.dim(line)),
  ].join('\n')
}
