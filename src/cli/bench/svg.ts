/**
 * A self-contained SVG chart of a run: per scenario, inline and worker medians as bars with a
 * whisker out to p99, the floor and the module-model figure where there are some, and the goal
 * as a dashed line. Each scenario has its own scale (their units differ). Hand-written: a chart
 * library would be a dependency for forty lines of rectangles.
 */
import { describeMachine } from './machine.js'
import { formatValue } from './report.js'
import type { BenchReport, Figure, ScenarioResult } from './types.js'

const WIDTH = 960
const LABEL_X = 170
const BAR_X = 180
const BAR_W = 540
const BAR_H = 14
const GAP = 4
const HEAD = 40
const COLORS = { inline: '#7b8794', worker: '#e8833a', moduleModel: '#f2c14e', floor: '#5a9bd5', goal: '#c0392b', met: '#2e8b57', missed: '#c0392b' }

const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')

interface Bar {
  label: string
  figure: Figure | null
  color: string
}

function barsOf(result: ScenarioResult): Bar[] {
  const bars: Bar[] = [
    { label: 'inline', figure: result.inline, color: COLORS.inline },
    { label: 'worker', figure: result.worker, color: COLORS.worker },
  ]
  if (result.workerModuleModel) bars.push({ label: 'worker, module model', figure: result.workerModuleModel, color: COLORS.moduleModel })
  if (result.floor) bars.push({ label: 'floor', figure: result.floor, color: COLORS.floor })
  return bars
}

function row(result: ScenarioResult, top: number): { svg: string; height: number } {
  const bars = barsOf(result)
  const height = HEAD + bars.length * (BAR_H + GAP) + 12
  // The scale fits the medians and the goal; a p99 beyond it is clipped with an arrow, so one
  // long tail does not shrink every bar of the row to a sliver.
  const extent = Math.max(...bars.flatMap((b) => (b.figure ? [b.figure.median] : [])), result.goal.line ?? 0) * 1.25 || 1
  const x = (value: number) => BAR_X + (Math.min(Math.max(0, value), extent) / extent) * BAR_W
  const verdict = result.met ? 'met' : 'missed'
  const parts: string[] = [
    `<text x="12" y="${top + 18}" class="id">${escape(result.id)}</text>`,
    `<text x="44" y="${top + 18}" class="title">${escape(result.title)}</text>`,
    `<text x="44" y="${top + 32}" class="small">${escape(`${result.unit}, ${result.better} is better`)}</text>`,
    `<text x="${WIDTH - 12}" y="${top + 18}" class="verdict" fill="${result.met ? COLORS.met : COLORS.missed}" text-anchor="end">${verdict}</text>`,
    `<text x="${WIDTH - 12}" y="${top + 32}" class="small" text-anchor="end">goal: ${escape(result.goal.text)}</text>`,
  ]
  bars.forEach((bar, i) => {
    const y = top + HEAD + i * (BAR_H + GAP)
    const baseline = y + BAR_H - 3
    parts.push(`<text x="${LABEL_X}" y="${baseline}" class="small" text-anchor="end">${bar.label}</text>`)
    if (!bar.figure) {
      parts.push(`<text x="${BAR_X + 4}" y="${baseline}" class="small">n/a (see the notes)</text>`)
      return
    }
    const end = x(bar.figure.median)
    const tail = x(bar.figure.p99)
    const clipped = bar.figure.p99 > extent
    const mid = y + BAR_H / 2
    parts.push(`<rect x="${BAR_X}" y="${y}" width="${Math.max(1, end - BAR_X).toFixed(1)}" height="${BAR_H}" fill="${bar.color}"/>`)
    // The whisker runs from the median to the bad tail (left of the median for rates).
    parts.push(`<line x1="${end.toFixed(1)}" y1="${mid}" x2="${tail.toFixed(1)}" y2="${mid}" stroke="#333" stroke-width="1"/>`)
    parts.push(
      clipped
        ? `<path d="M${tail - 5} ${mid - 4} L${tail} ${mid} L${tail - 5} ${mid + 4}" fill="none" stroke="#333"/>`
        : `<line x1="${tail.toFixed(1)}" y1="${y + 3}" x2="${tail.toFixed(1)}" y2="${y + BAR_H - 3}" stroke="#333" stroke-width="1"/>`,
    )
    const labelX = Math.max(end, tail) + 6
    parts.push(`<text x="${labelX.toFixed(1)}" y="${baseline}" class="small">${escape(formatValue(bar.figure.median, result.unit))} · p99 ${escape(formatValue(bar.figure.p99, result.unit))}</text>`)
  })
  if (result.goal.line !== undefined) {
    const gx = x(result.goal.line).toFixed(1)
    parts.push(`<line x1="${gx}" y1="${top + HEAD - 4}" x2="${gx}" y2="${top + height - 8}" stroke="${COLORS.goal}" stroke-width="1.5" stroke-dasharray="4 3"/>`)
  }
  parts.push(`<line x1="0" y1="${top + height}" x2="${WIDTH}" y2="${top + height}" stroke="#e3e3e3"/>`)
  return { svg: parts.join('\n'), height }
}

export function renderSvg(report: BenchReport): string {
  const header = 74
  const rows: string[] = []
  let top = header
  for (const result of report.scenarios) {
    const { svg, height } = row(result, top)
    rows.push(svg)
    top += height
  }
  // Legend entries laid out by their text length (about 6 px a character at this size).
  let lx = 12
  const legend = [
    ['inline', COLORS.inline],
    ['worker', COLORS.worker],
    ['worker, module model (no RPC)', COLORS.moduleModel],
    ['floor (no library)', COLORS.floor],
  ]
    .map(([label, color]) => {
      const item = `<rect x="${lx}" y="50" width="12" height="10" fill="${color}"/><text x="${lx + 16}" y="59" class="small">${escape(label!)}</text>`
      lx += 16 + label!.length * 6 + 18
      return item
    })
    .join('\n')
  const goalKey = `<line x1="${lx}" y1="55" x2="${lx + 20}" y2="55" stroke="${COLORS.goal}" stroke-width="1.5" stroke-dasharray="4 3"/><text x="${lx + 26}" y="59" class="small">goal · bar: median · whisker: p99 (arrow: beyond the scale)</text>`
  return `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${top + 10}" viewBox="0 0 ${WIDTH} ${top + 10}" font-family="Helvetica, Arial, sans-serif">
<style>
  .h { font-size: 16px; font-weight: bold; }
  .id { font-size: 13px; font-weight: bold; }
  .title { font-size: 12px; }
  .small { font-size: 10.5px; fill: #444; }
  .verdict { font-size: 12px; font-weight: bold; }
</style>
<rect width="100%" height="100%" fill="#fff"/>
<text x="12" y="22" class="h">subagent-worker bench: inline vs worker${report.quick ? ' (--quick)' : ''}</text>
<text x="12" y="40" class="small">${escape(describeMachine(report.machine))} · ${escape(report.startedAt)}</text>
${legend}
${goalKey}
${rows.join('\n')}
</svg>
`
}
