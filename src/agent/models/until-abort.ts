/** A model's stream, cut loose from a model that goes on after its request was aborted. */
import type { StreamChunk } from '../../protocol/shapes/stream.js'
import { describeShape } from '../../protocol/values.js'

/**
 * Iterates a model stream but stops waiting the moment the signal aborts, even if the model
 * ignores it. One abort listener serves the whole stream and each pull settles a promise of its
 * own: a `Promise.race` with the abort per chunk would leave a reaction on the abort's promise for
 * every chunk, each holding its chunk until the stream ends (about 400 bytes a chunk), and it costs
 * three times the CPU of this on every chunk.
 */
export function untilAbort(stream: AsyncIterable<StreamChunk>, signal: AbortSignal): AsyncIterableIterator<StreamChunk> {
  const iterator = stream[Symbol.asyncIterator]()
  let open = true
  /** Rejects the pull in flight, if one is. */
  let stopPull: ((reason: unknown) => void) | undefined
  // Kept here: the signal's own getter is checked for its receiver, and this runs on every chunk.
  let aborted = signal.aborted
  const onAbort = () => {
    aborted = true
    stopPull?.(signal.reason)
  }
  signal.addEventListener('abort', onAbort, { once: true })
  /** The stream is over for this iterator; `early`: before the model finished it, so it is told to return. */
  const close = (early: boolean) => {
    if (!open) return
    open = false
    stopPull = undefined
    signal.removeEventListener('abort', onAbort)
    if (!early) return
    // Whatever the model answers, or throws, the reader has its own reason to stop.
    try {
      Promise.resolve(iterator.return?.()).catch(() => {})
    } catch {}
  }
  const over = (): Promise<IteratorResult<StreamChunk>> => Promise.resolve({ done: true, value: undefined })
  return {
    [Symbol.asyncIterator]() {
      return this
    },
    // The loop pulls one chunk at a time (for await), so one pull at most is in flight.
    next() {
      if (!open) return over()
      if (aborted) {
        close(true)
        return Promise.reject(signal.reason)
      }
      return new Promise((resolve, reject) => {
        const fail = (error: unknown) => {
          close(true)
          reject(error)
        }
        stopPull = fail
        const pulled = (step: IteratorResult<StreamChunk>) => {
          stopPull = undefined
          if (typeof step !== 'object' || step === null) return fail(new TypeError(`the model's stream gave ${describeShape(step)} where an iterator result was due`))
          if (step.done) close(false)
          resolve(step)
        }
        try {
          iterator.next().then(pulled, fail)
        } catch (error) {
          fail(error)
        }
      })
    },
    return() {
      close(true)
      return over()
    },
  }
}
