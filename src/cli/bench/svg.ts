/**
 * A self-contained SVG chart of a run: per scenario, inline and worker medians as bars with a
 * whisker out to p99, the floor where there is one, and the goal as a dashed line when it is an
 * absolute figure. Each scenario has its own scale (their units differ). Hand-written: a chart
 * library would be a dependency for forty lines of rectangles.
 */
import { describeMachine } from './machine.js'
import { formatValue } from './report.js'
import type { BenchReport, Figure, ScenarioResult } from './types.js'

const WIDTH = 960
const LABEL_W = 300
const BAR_X = LABEL_W + 10
const BAR_W = 430
const BAR_H = 14
const GAP = 4
const ROW_PAD = 18
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
  const height = ROW_PAD * 2 + bars.length * (BAR_H + GAP)
  const extent = Math.max(...bars.flatMap((b) => (b.figure ? [b.figure.median, b.figure.p99] : [])), result.goal.absolute ?? 0) * 1.08 || 1
  const x = (value: number) => BAR_X + (Math.max(0, value) / extent) * BAR_W
  const parts: string[] = []
  parts.push(`<text x="12" y="${top + ROW_PAD + 8}" class="id">${escape(result.id)}</text>`)
  parts.push(`<text x="48" y="${top + ROW_PAD + 8}" class="title">${escape(shorten(result.title, 44))}</text>`)
  parts.push(`<text x="48" y="${top + ROW_PAD + 24}" class="small">${escape(shorten(`${result.unit}, ${result.better} is better`, 46))}</text>`)
  bars.forEach((bar, i) => {
    const y = top + ROW_PAD + i * (BAR_H + GAP)
    parts.push(`<text x="${BAR_X - 6}" y="${y + BAR_H - 3}" class="small" text-anchor="end">${bar.label}</text>`)
    if (!bar.figure) {
      parts.push(`<text x="${BAR_X + 4}" y="${y + BAR_H - 3}" class="small">n/a${result.inlineNote ? ' (cannot be stopped inline)' : ''}</text>`)
      return
    }
    const end = x(bar.figure.median)
    const tail = x(bar.figure.p99)
    parts.push(`<rect x="${BAR_X}" y="${y}" width="${(end - BAR_X).toFixed(1)}" height="${BAR_H}" fill="${bar.color}"/>`)
    // The whisker runs from the median to the bad tail (left of the median for rates).
    const mid = y + BAR_H / 2
    parts.push(`<line x1="${end.toFixed(1)}" y1="${mid}" x2="${tail.toFixed(1)}" y2="${mid}" stroke="#333" stroke-width="1"/>`)
    parts.push(`<line x1="${tail.toFixed(1)}" y1="${y + 3}" x2="${tail.toFixed(1)}" y2="${y + BAR_H - 3}" stroke="#333" stroke-width="1"/>`)
    const labelX = Math.max(end, tail) + 6
    parts.push(`<text x="${labelX.toFixed(1)}" y="${y + BAR_H - 3}" class="small">${escape(formatValue(bar.figure.median, result.unit))} · p99 ${escape(formatValue(bar.figure.p99, result.unit))}</text>`)
  })
  if (result.goal.absolute !== undefined) {
    const gx = x(result.goal.absolute).toFixed(1)
    parts.push(`<line x1="${gx}" y1="${top + ROW_PAD - 6}" x2="${gx}" y2="${top + height - ROW_PAD + 2}" stroke="${COLORS.goal}" stroke-width="1.5" stroke-dasharray="4 3"/>`)
  }
  const verdict = result.met ? 'met' : 'missed'
  parts.push(`<text x="${WIDTH - 12}" y="${top + ROW_PAD + 8}" class="verdict" fill="${result.met ? COLORS.met : COLORS.missed}" text-anchor="end">${verdict}</text>`)
  parts.push(`<text x="${WIDTH - 12}" y="${top + ROW_PAD + 24}" class="small" text-anchor="end">${escape(shorten(result.goal.text, 34))}</text>`)
  parts.push(`<line x1="0" y1="${top + height}" x2="${WIDTH}" y2="${top + height}" stroke="#e3e3e3"/>`)
  return { svg: parts.join('\n'), height }
}

function shorten(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`
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
  const legend = [
    ['inline', COLORS.inline],
    ['worker', COLORS.worker],
    ['worker, module model (no RPC)', COLORS.moduleModel],
    ['floor (no library)', COLORS.floor],
  ]
    .map(([label, color], i) => `<rect x="${12 + i * 110}" y="50" width="12" height="10" fill="${color}"/><text x="${28 + i * 110}" y="59" class="small">${escape(label!)}</text>`)
    .join('\n')
  const goalKey = `<line x1="560" y1="55" x2="580" y2="55" stroke="${COLORS.goal}" stroke-width="1.5" stroke-dasharray="4 3"/><text x="586" y="59" class="small">goal (absolute ones)   bars: median, whisker: p99</text>`
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
