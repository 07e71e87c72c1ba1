/**
 * `fromLanguageModel(model)`: an AI SDK language model (spec v2 of `ai` 5 or v3 of `ai` 6) as a
 * library Model. It is plain code, so it can be registered on the host (`host.models.register`)
 * or exported by an agent module and run on a worker thread.
 */
import type { Model, ModelRequest, StreamChunk } from '../index.js'
import { describeError } from './error-text.js'
import type { LanguageModelLike, StreamPartLike } from './language-model.js'
import { toCallOptions } from './prompt.js'
import { toStreamChunks } from './stream.js'

const SPECS = new Set<unknown>(['v2', 'v3'])

/**
 * Each request becomes one `doStream` call with the prompt, the tools (as function tools with
 * their JSON Schemas), `maxOutputTokens` and the request's signal. The request's `model` id is
 * not sent: the instance already names its model. An error part, a thrown or failed stream, a
 * finish reason other than stop / length / tool-calls / content-filter, and a stream without a
 * finish part all throw, so the child's turn ends `error` saying which.
 */
export function fromLanguageModel(model: LanguageModelLike): Model {
  if (typeof model !== 'object' || model === null || typeof model.doStream !== 'function') {
    throw new TypeError(
      'fromLanguageModel needs an AI SDK language model instance with doStream(), e.g. openai("gpt-4o"); a model id string must be resolved by its provider first',
    )
  }
  if (!SPECS.has(model.specificationVersion)) {
    throw new TypeError(
      `AI SDK language model specification ${JSON.stringify(model.specificationVersion)} is not supported: fromLanguageModel handles "v2" (ai 5) and "v3" (ai 6)`,
    )
  }
  const name = `AI SDK model ${model.provider}/${model.modelId}`
  return {
    async *stream(request: ModelRequest): AsyncGenerator<StreamChunk> {
      const { signal } = request
      if (signal.aborted) throw signal.reason
      const options = toCallOptions(request)
      let stream: ReadableStream<StreamPartLike>
      try {
        ;({ stream } = await untilAborted(Promise.resolve(model.doStream(options)), signal))
      } catch (error) {
        if (signal.aborted) throw signal.reason
        throw new Error(`${name} failed to start streaming: ${describeError(error)}`, { cause: error })
      }
      if (typeof stream?.getReader !== 'function') throw new Error(`${name}'s doStream did not resolve to { stream: ReadableStream }`)
      yield* toStreamChunks(stream, signal, name)
    },
  }
}

/** Settles with `call`, or rejects with the abort reason the moment the signal aborts. */
function untilAborted<T extends { stream: ReadableStream<StreamPartLike> }>(call: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      reject(signal.reason)
      // A stream that arrives after the cancel is released, not left open.
      call.then(({ stream }) => stream.cancel(signal.reason)).catch(() => {})
    }
    signal.addEventListener('abort', onAbort, { once: true })
    call.then(
      (value) => {
        signal.removeEventListener('abort', onAbort)
        resolve(value)
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort)
        reject(error)
      },
    )
  })
}
