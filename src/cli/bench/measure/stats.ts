/** Summaries of repeated measurements: a benchmark reports a distribution, never one sample. */

export interface Summary {
  /** How many samples the summary is built from. */
  n: number
  median: number
  /**
   * The 99th-percentile worst sample: the slow tail for times and sizes, the low tail (1st
   * percentile) for rates, so that "p99" always reads as "how bad it gets".
   */
  p99: number
  min: number
  max: number
  mean: number
}

export type Direction = 'lower' | 'higher'

/** Linear interpolation between closest ranks (the common "type 7" definition). */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) throw new RangeError('percentile of no samples')
  const rank = (sorted.length - 1) * p
  const lo = Math.floor(rank)
  const hi = Math.ceil(rank)
  const a = sorted[lo]!
  const b = sorted[hi]!
  return a + (b - a) * (rank - lo)
}

export function summarize(samples: readonly number[], better: Direction = 'lower'): Summary {
  if (samples.length === 0) throw new RangeError('cannot summarize an empty sample set')
  const sorted = [...samples].sort((a, b) => a - b)
  const sum = sorted.reduce((total, x) => total + x, 0)
  return {
    n: sorted.length,
    median: percentile(sorted, 0.5),
    p99: percentile(sorted, better === 'lower' ? 0.99 : 0.01),
    min: sorted[0]!,
    max: sorted[sorted.length - 1]!,
    mean: sum / sorted.length,
  }
}

/** Rounds for the JSON file: sub-microsecond digits of a timer are noise. */
export function round(value: number, digits = 4): number {
  const scale = 10 ** digits
  return Math.round(value * scale) / scale
}

/** A summary plus the raw samples it came from (kept for the JSON file). */
export function figure(samples: readonly number[], better: Direction): Summary & { samples: number[] } {
  return { ...summarize(samples, better), samples: samples.map((x) => round(x)) }
}
