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
  /** A process's frame as its pipe carries it (pipe.ts), read before it is decoded: twice frameBytes, since text may take two bytes a character there. */
  pipeFrameBytes: 128 * MiB,
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
  /** Tool schemas in a runner's table of its module's tools (its `ready`). */
  moduleTools: 1_000,
  /** Host calls one child may have running beyond `maxParallelToolCalls` (its loop's model call). */
  callsBeyondParallel: 1,
} as const

/**
 * estimatedSize's stack of values still to measure, and its height: it is synchronous and
 * re-entered by nothing it reads, so one serves every call. It is not shortened after an ordinary
 * value (setting an array's length to 0 frees its backing store, which the next call would
 * allocate again): a slot is cleared as it is popped, so nothing measured stays held. After a
 * value that grew it past KEPT_SLOTS it is, so one large frame does not keep its memory.
 */
const stack: unknown[] = []
let height = 0
const KEPT_SLOTS = 1024

/** What each value of a frame is counted as, beyond the characters of its strings and keys and the bytes of its buffers. */
const VALUE_BYTES = 16

function push(value: unknown): void {
  stack[height++] = value
}

function pop(): unknown {
  const value = stack[--height]
  stack[height] = undefined
  return value
}

/**
 * A value's size as the host holds it, estimated: VALUE_BYTES per value plus the length of every
 * string and key and the bytes of every buffer. The walk stops as soon as the estimate passes
 * `limit` (returning more than `limit`), so measuring costs at most `limit / VALUE_BYTES` steps,
 * however large the value. Maps and Sets count by their entries (a structured clone carries them).
 * `omit`: a key of the value itself whose value counts as absent (the caller measures it apart).
 * No closure, no copy and no allocation once warm (one stack, emptied before it returns): the
 * host measures every message of every frame with it.
 */
export function estimatedSize(value: unknown, limit: number, omit?: string): number {
  let size = VALUE_BYTES
  push(value)
  let top = omit !== undefined
  try {
    while (height > 0 && size <= limit) {
      const next = pop()
      if (typeof next === 'string') size += next.length
      else if (typeof next !== 'object' || next === null) continue
      else if (ArrayBuffer.isView(next) || next instanceof ArrayBuffer) size += next.byteLength
      else if (Array.isArray(next) || next instanceof Set) {
        for (const item of next) {
          size += VALUE_BYTES
          if (size > limit) break
          push(item)
        }
      } else if (next instanceof Map) {
        for (const entry of next as Map<unknown, unknown>) {
          size += 2 * VALUE_BYTES
          if (size > limit) break
          push(entry[0])
          push(entry[1])
        }
      } else {
        for (const key in next) {
          size += key.length + VALUE_BYTES
          if (size > limit) break
          if (!top || key !== omit) push((next as Record<string, unknown>)[key])
        }
      }
      top = false
    }
  } finally {
    // What is left unmeasured (past the limit, or after a throw) is neither held nor counted next time.
    if (stack.length > KEPT_SLOTS) {
      stack.length = 0
      height = 0
    } else while (height > 0) pop()
  }
  return size
}
