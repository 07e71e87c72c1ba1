/**
 * The host's event-loop delay, read with perf_hooks monitorEventLoopDelay (S6 and S9). A
 * monitor records the gap between two of its ticks, so it must tick once before the measured
 * work (or a block from the very start is never seen) and once after it.
 */
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks'
import { setImmediate as turn } from 'node:timers/promises'

/**
 * The histogram's sampling timer period. Each recorded value is a whole period (the timer's
 * expected wait plus its delay), so the period is subtracted to report the delay alone.
 */
export const RESOLUTION_MS = 1
const NS_PER_MS = 1e6

export function loopMonitor(): IntervalHistogram {
  return monitorEventLoopDelay({ resolution: RESOLUTION_MS })
}

/** Lets the event loop run a few monitor periods. */
export async function loopTurns(): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, 3 * RESOLUTION_MS))
  await turn()
}

/** A histogram value (ns, a whole period) as the delay alone, in ms. */
export const delayMs = (ns: number) => Math.max(0, ns / NS_PER_MS - RESOLUTION_MS)
