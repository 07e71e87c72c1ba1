/** A model whose every request is metered: the host's budget counts what it serves a child. */
import type { StreamChunk } from '../../protocol/shapes/stream.js'
import type { Model, ModelRequest } from './model.js'

/** One request's meter: made as the request starts (throwing refuses it), shown each chunk, closed once. */
export interface StreamMeter {
  see(chunk: StreamChunk): void
  /** The request ended, failed or was left. */
  close(): void
}

/**
 * `model` with each request metered by a `meter()` of its own. Its stream is a pass-through
 * iterator, not an async generator: a reader that leaves (an aborted child) reaches the model's
 * own `return` at once, where a generator would hold it behind a pull the model never answers,
 * and it costs no generator's promises a chunk. A reader that reads every chunk anyway (the
 * host's server of model calls) meters each request itself with `meter` and reads `model`
 * directly, one iterator less a chunk.
 */
export class MeteredModel implements Model {
  constructor(
    readonly model: Model,
    readonly meter: () => StreamMeter,
  ) {}

  stream(request: ModelRequest): AsyncIterable<StreamChunk> {
    let stream: AsyncIterator<StreamChunk> | undefined
    let counting: StreamMeter | undefined
    let open = true
    const close = () => {
      open = false
      counting?.close()
    }
    const done: IteratorResult<StreamChunk> = { done: true, value: undefined }
    const iterator: AsyncIterableIterator<StreamChunk> = {
      [Symbol.asyncIterator]: () => iterator,
      next: async () => {
        if (!open) return done
        try {
          if (!stream) {
            counting = this.meter()
            stream = this.model.stream(request)[Symbol.asyncIterator]()
          }
          const result = await stream.next()
          if (typeof result !== 'object' || result === null || result.done) close()
          else counting?.see(result.value)
          return result
        } catch (error) {
          close()
          throw error
        }
      },
      return: async () => {
        close()
        const left = stream
        stream = undefined
        await left?.return?.()
        return done
      },
    }
    return iterator
  }
}
