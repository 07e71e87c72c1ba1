/** Terminal output helpers: colour only on a TTY (and never under NO_COLOR), aligned tables. */
import type { WriteStream } from 'node:tty'

export interface Style {
  bold(text: string): string
  dim(text: string): string
  green(text: string): string
  yellow(text: string): string
  red(text: string): string
  cyan(text: string): string
}

export function styleFor(stream: NodeJS.WriteStream | WriteStream): Style {
  const on = Boolean(stream.isTTY) && !('NO_COLOR' in process.env)
  const wrap = (open: number, close: number) => (text: string) => (on ? `\u001b[${open}m${text}\u001b[${close}m` : text)
  return { bold: wrap(1, 22), dim: wrap(2, 22), green: wrap(32, 39), yellow: wrap(33, 39), red: wrap(31, 39), cyan: wrap(36, 39) }
}

const ANSI = /\u001b\[[0-9;]*m/g
const visible = (text: string) => text.replace(ANSI, '').length

/** Renders rows as aligned columns; cells may carry colour codes. */
export function table(header: string[], rows: string[][], style: Style): string {
  const widths = header.map((h, i) => Math.max(visible(h), ...rows.map((r) => visible(r[i] ?? ''))))
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c + ' '.repeat(widths[i]! - visible(c)))).join('  ')
  return [style.bold(line(header)), ...rows.map(line)].join('\n')
}

export function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`
}

export function ms(value: number): string {
  return value >= 1000 ? `${(value / 1000).toFixed(2)} s` : `${Math.round(value)} ms`
}
