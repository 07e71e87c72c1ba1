/**
 * A self-contained SVG chart of a run: per scenario, the inline, worker and process medians (and
 * remote's, when the run measured it) as bars with a whisker out to p99, the floors and the
 * module-model figure where there are some,
 * each goal that is on the row's own figure as a dashed line, and a reference (S9's ideal) as a
 * dotted one. Every goal is listed under the title with its transport and figure. Each scenario
 * has its own scale (their units differ). Hand-written: a chart library would be a dependency for
 * a hundred lines of rectangles.
 */
import { describeMachine } from '../measure/machine.js'
import { formatValue, goalFigure, hasRemote } from './report.js'
import type { BenchReport, Figure, ScenarioResult } from '../types.js'

const WIDTH = 960
const LABEL_X = 170
const BAR_X = 180
const BAR_W = 540
const BAR_H = 14
const GAP = 4
const HEAD = 40
/** Where a row's title starts: clear of a four-character id (S9um). */
const TEXT_X = 52
const GOAL_LINE_H = 13
const COLORS = {
  inline: '#7b8794',
  worker: '#e8833a',
  process: '#3f7f6e',
  remote: '#b8406e',
  moduleModel: '#f2c14e',
  floor: '#5a9bd5',
  channelFloor: '#8e6bbf',
  bullmqFloor: '#d99ab2',
  goal: '#c0392b',
  reference: '#555',
  met: '#2e8b57',
  missed: '#c0392b',
}

const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')

interface Bar {
  label: string
  figure: Figure | null
  color: string
  /** A floor: left out of the row's scale, so a floor far beyond the library's figures (the channel's rate) does not flatten them. */
  floor?: boolean
}

function barsOf(result: ScenarioResult): Bar[] {
  const bars: Bar[] = [
    { label: 'inline', figure: result.inline, color: COLORS.inline },
    { label: 'worker', figure: result.worker, color: COLORS.worker },
  ]
  // An A/B row: the worker bar is the feature on, this one the same workload with it off.
  if (result.ab) bars.push({ label: 'worker, off', figure: result.ab.offFigure, color: COLORS.inline })
  if (result.workerModuleModel) bars.push({ label: 'worker, module model', figure: result.workerModuleModel, color: COLORS.moduleModel })
  bars.push({ label: 'process', figure: result.process, color: COLORS.process })
  // Absent when the run had no remote column; null (n/a) on a row it does not apply to.
  if (result.remote !== undefined) bars.push({ label: 'remote', figure: result.remote, color: COLORS.remote })
  if (result.floor) bars.push({ label: 'piscina floor', figure: result.floor, color: COLORS.floor, floor: true })
  if (result.channelFloor) bars.push({ label: 'channel floor', figure: result.channelFloor, color: COLORS.channelFloor, floor: true })
  if (result.bullmqFloor) bars.push({ label: 'bullmq floor', figure: result.bullmqFloor, color: COLORS.bullmqFloor, floor: true })
  return bars
}

function row(result: ScenarioResult, top: number): { svg: string; height: number } {
  const bars = barsOf(result)
  const head = HEAD + result.goals.length * GOAL_LINE_H
  const height = head + bars.length * (BAR_H + GAP) + 12
  // Two transports' goals may sit at one place (S8): one line for both.
  const lines = [...new Set(result.goals.flatMap((goal) => (goal.line === undefined ? [] : [goal.line])))]
  // The scale fits the library's medians, the goal lines and the reference; a p99 or a floor
  // beyond it is clipped (an arrow, a break in the bar), so one long tail or one far floor does
  // not shrink every bar of the row to a sliver.
  const fitted = bars.flatMap((b) => (b.figure && !b.floor ? [b.figure.median] : []))
  const extent = Math.max(...fitted, ...lines, result.reference?.value ?? 0) * 1.25 || 1
  const x = (value: number) => BAR_X + (Math.min(Math.max(0, value), extent) / extent) * BAR_W
  const parts: string[] = [
    `<text x="12" y="${top + 18}" class="id">${escape(result.id)}</text>`,
    `<text x="${TEXT_X}" y="${top + 18}" class="title">${escape(result.title)}</text>`,
    `<text x="${TEXT_X}" y="${top + 32}" class="small">${escape(`${result.unit}, ${result.better} is better`)}</text>`,
    result.goals.length === 0
      ? `<text x="${WIDTH - 12}" y="${top + 18}" class="verdict" fill="${COLORS.reference}" text-anchor="end">no goal</text>`
      : `<text x="${WIDTH - 12}" y="${top + 18}" class="verdict" fill="${result.met ? COLORS.met : COLORS.missed}" text-anchor="end">${result.met ? 'met' : 'missed'}</text>`,
  ]
  result.goals.forEach((goal, i) => {
    // A style attribute, not fill=: the .small class would override a presentation attribute.
    const text = `goal (${goal.mode}): ${goal.text} · ${goal.mode} ${goalFigure(goal, result.unit)} · ${goal.met ? 'met' : 'missed'}`
    parts.push(`<text x="${TEXT_X}" y="${top + 32 + (i + 1) * GOAL_LINE_H}" class="small" style="fill: ${goal.met ? COLORS.met : COLORS.missed}">${escape(text)}</text>`)
  })
  bars.forEach((bar, i) => {
    const y = top + head + i * (BAR_H + GAP)
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
    if (bar.figure.median > extent) {
      // A break near the bar's end: its median is off the scale (its label gives it).
      parts.push(`<path d="M${end - 14} ${y - 1} l4 ${BAR_H + 2} M${end - 9} ${y - 1} l4 ${BAR_H + 2}" stroke="#fff" stroke-width="2"/>`)
    } else {
      // The whisker runs from the median to the bad tail (left of the median for rates).
      parts.push(`<line x1="${end.toFixed(1)}" y1="${mid}" x2="${tail.toFixed(1)}" y2="${mid}" stroke="#333" stroke-width="1"/>`)
      parts.push(
        clipped
          ? `<path d="M${tail - 5} ${mid - 4} L${tail} ${mid} L${tail - 5} ${mid + 4}" fill="none" stroke="#333"/>`
          : `<line x1="${tail.toFixed(1)}" y1="${y + 3}" x2="${tail.toFixed(1)}" y2="${y + BAR_H - 3}" stroke="#333" stroke-width="1"/>`,
      )
    }
    const labelX = Math.max(end, tail) + 6
    parts.push(`<text x="${labelX.toFixed(1)}" y="${baseline}" class="small">${escape(formatValue(bar.figure.median, result.unit))} · p99 ${escape(formatValue(bar.figure.p99, result.unit))}</text>`)
  })
  for (const line of lines) {
    const gx = x(line).toFixed(1)
    parts.push(`<line x1="${gx}" y1="${top + head - 4}" x2="${gx}" y2="${top + height - 8}" stroke="${COLORS.goal}" stroke-width="1.5" stroke-dasharray="4 3"/>`)
  }
  if (result.reference) {
    const rx = x(result.reference.value)
    parts.push(`<line x1="${rx.toFixed(1)}" y1="${top + head - 4}" x2="${rx.toFixed(1)}" y2="${top + height - 8}" stroke="${COLORS.reference}" stroke-width="1" stroke-dasharray="1 2"/>`)
    parts.push(`<text x="${(rx + 3).toFixed(1)}" y="${top + head - 6}" class="small">${escape(`${result.reference.label} ${formatValue(result.reference.value, result.unit)}`)}</text>`)
  }
  parts.push(`<line x1="0" y1="${top + height}" x2="${WIDTH}" y2="${top + height}" stroke="#e3e3e3"/>`)
  return { svg: parts.join('\n'), height }
}

/** Legend lines: a line is this much below the one before. */
const LEGEND_LINE_H = 14

export function renderSvg(report: BenchReport): string {
  // Legend entries laid out by their text length (about 6 px a character at this size), on as
  // many lines as they need: with the remote column's two they are wider than the chart.
  const remote = hasRemote(report)
  let lx = 12
  let ly = 50
  const legend = [
    ['inline', COLORS.inline],
    ['worker', COLORS.worker],
    ['worker, module model (no RPC)', COLORS.moduleModel],
    ['process', COLORS.process],
    ...(remote ? [['remote (BullMQ, 2 nodes)', COLORS.remote]] : []),
    ['piscina floor (bare tasks)', COLORS.floor],
    ['channel floor (bare channel per thread)', COLORS.channelFloor],
    ...(remote ? [['bullmq floor (bare job round trip)', COLORS.bullmqFloor]] : []),
  ]
    .map(([label, color]) => {
      const width = 16 + label!.length * 6
      if (lx > 12 && lx + width > WIDTH - 12) {
        lx = 12
        ly += LEGEND_LINE_H
      }
      const item = `<rect x="${lx}" y="${ly}" width="12" height="10" fill="${color}"/><text x="${lx + 16}" y="${ly + 9}" class="small">${escape(label!)}</text>`
      lx += width + 18
      return item
    })
    .join('\n')
  const extra = ly - 50
  const goalKey = `<line x1="12" y1="${73 + extra}" x2="32" y2="${73 + extra}" stroke="${COLORS.goal}" stroke-width="1.5" stroke-dasharray="4 3"/><text x="38" y="${77 + extra}" class="small">goal (on its transport's median) · bar: median · whisker: p99 (arrow: beyond the scale) · break in a bar: median beyond the scale · dotted: reference</text>`
  const header = 92 + extra
  const rows: string[] = []
  let top = header
  for (const result of report.scenarios) {
    const { svg, height } = row(result, top)
    rows.push(svg)
    top += height
  }
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
<text x="12" y="22" class="h">subagent-worker bench: inline, worker${remote ? ', process and remote' : ' and process'}${report.plan === 'full' ? '' : ` (--${report.plan})`}</text>
<text x="12" y="40" class="small">${escape(describeMachine(report.machine))} · ${escape(report.startedAt)}</text>
${legend}
${goalKey}
${rows.join('\n')}
</svg>
`
}
