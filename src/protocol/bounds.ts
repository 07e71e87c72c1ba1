/**
 * What one runner may make its host do, in one table. A runner (a thread, a process, a node) is
 * not trusted, and reading what it sends costs the host's own event loop: each bound caps that
 * cost. Going past one is a protocol violation that stops the runner. Every value is far above
 * what a legitimate runner sends (a thousand children coalescing their events into one frame is
 * about a thousand messages); docs/design.md ("Bounds on a runner") says why each is what it is.
 */

const MiB = 1024 * 1024

export const RUNNER_BOUNDS = {
  /** Messages in one frame: checked before the frame is read at all. */
  frameMessages: 10_000,
  /** Estimated size of one frame (see estimatedSize). */
  frameBytes: 64 * MiB,
  /** Estimated size of one event a child records. */
  eventBytes: 16 * MiB,
  /** Messages the host reads from one runner in one event-loop turn; later frames wait for the next turn. */
  turnMessages: 5_000,
  /** Frames the host reads from one runner in one event-loop turn (each costs the host more than its messages: a delivery, a check). */
  turnFrames: 500,
  /** Turns in a row in which a runner filled its share: more, and it sends faster than the host can read. */
  fullTurns: 100,
  /** Messages of one runner read off its channel and waiting for their turn. */
  backlogMessages: 100_000,
  /** Host calls one child may have running beyond `maxParallelToolCalls` (its loop's model call). */
  callsBeyondParallel: 1,
} as const

/** What each value of a frame is counted as, beyond the characters of its strings and keys and the bytes of its buffers. */
const VALUE_BYTES = 16

/**
 * A value's size as the host holds it, estimated: VALUE_BYTES per value plus the length of every
 * string and key and the bytes of every buffer. The walk stops as soon as the estimate passes
 * `limit` (returning more than `limit`), so measuring costs at most `limit / VALUE_BYTES` steps,
 * however large the value. Maps and Sets count by their entries (a structured clone carries them).
 */
export function estimatedSize(value: unknown, limit: number): number {
  let size = VALUE_BYTES
  const pending: unknown[] = [value]
  const add = (item: unknown): boolean => {
    size += VALUE_BYTES
    pending.push(item)
    return size <= limit
  }
  while (pending.length > 0 && size <= limit) {
    const next = pending.pop()
    if (typeof next === 'string') size += next.length
    else if (typeof next !== 'object' || next === null) continue
    else if (ArrayBuffer.isView(next) || next instanceof ArrayBuffer) size += next.byteLength
    else if (Array.isArray(next) || next instanceof Set) {
      for (const item of next) if (!add(item)) break
    } else if (next instanceof Map) {
      for (const [key, item] of next) if (!add(key) || !add(item)) break
    } else {
      for (const key in next) {
        size += key.length
        if (!add((next as Record<string, unknown>)[key])) break
      }
    }
  }
  return size
}
