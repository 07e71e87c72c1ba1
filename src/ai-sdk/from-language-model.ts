/**
 * `fromLanguageModel(model, options?)`: an AI SDK language model (spec v2 of `ai` 5, v3 of `ai` 6,
 * v4 of `ai` 7) as a library Model, under the same request policy as `OpenAICompatibleModel`
 * (agent/models/retry.ts): retries of a 429, a 5xx or a lost connection before any chunk reached the
 * child, honouring retry-after; a silence timeout; a concurrency bound across every child using
 * it. It is plain code, so it can be registered on the host (`host.models.register`) or exported
 * by an agent module and run on a worker thread.
 */
import type { Model, ModelRequest, StreamChunk } from '../index.js'
import { RequestPolicy, type RequestPolicyOptions } from '../agent/models/retry.js'
import { judgeCallFailure } from './call-failure.js'
import type { LanguageModelLike, StreamPartLike } from './language-model.js'
import { toCallOptions } from './prompt.js'
import { toStreamChunks } from './stream.js'
import { messageOf, subagentError } from '../protocol/errors.js'

const SPECS = new Set<unknown>(['v2', 'v3', 'v4'])

/** `maxRetries` (default 2), `maxConcurrency` (default: no limit), `timeoutMs` (default 600000), as for `OpenAICompatibleModel`. */
export type FromLanguageModelOptions = RequestPolicyOptions

/**
 * Each attempt is one `doStream` call with the prompt, the tools (as function tools with their
 * JSON Schemas), `maxOutputTokens` and an abort signal. The request's `model` id is not sent: the
 * instance already names its model. An HTTP failure names its status and the provider's message;
 * an error part, a thrown or failed stream, a finish reason other than stop / length / tool-calls
 * / content-filter, and a stream without a finish part all throw, so the child's turn ends
 * `error` saying which.
 */
export function fromLanguageModel(model: LanguageModelLike, options: FromLanguageModelOptions = {}): Model {
  if (typeof model !== 'object' || model === null || typeof model.doStream !== 'function') {
    throw subagentError('ERR_SUBAGENT_ARGUMENT',
      'fromLanguageModel needs an AI SDK language model instance with doStream(), e.g. openai("gpt-4o"); a model id string must be resolved by its provider first',
    )
  }
  if (!SPECS.has(model.specificationVersion)) {
    throw subagentError('ERR_SUBAGENT_ARGUMENT',
      `AI SDK language model specification ${JSON.stringify(model.specificationVersion)} is not supported: fromLanguageModel handles "v2" (ai 5), "v3" (ai 6) and "v4" (ai 7)`,
    )
  }
  if (typeof options !== 'object' || options === null) throw subagentError('ERR_SUBAGENT_ARGUMENT', 'fromLanguageModel options must be an object: { maxRetries?, maxConcurrency?, timeoutMs? }')
  const policy = new RequestPolicy(options, 'fromLanguageModel')
  const name = `AI SDK model ${model.provider}/${model.modelId}`
  return {
    stream: (request: ModelRequest) =>
      policy.run(
        request.signal,
        (signal) => attempt(model, { ...request, signal }, name),
        (error, state) => judgeCallFailure(error, state, name),
      ),
  }
}

/** One `doStream` call and its stream, read under the attempt's signal. */
async function* attempt(model: LanguageModelLike, request: ModelRequest, name: string): AsyncGenerator<StreamChunk> {
  const { signal } = request
  if (signal.aborted) throw signal.reason
  const options = toCallOptions(request)
  let stream: ReadableStream<StreamPartLike>
  try {
    ;({ stream } = await untilAborted(Promise.resolve(model.doStream(options)), signal))
  } catch (error) {
    if (signal.aborted) throw signal.reason
    throw subagentError('ERR_SUBAGENT_MODEL_STREAM', `${name} failed to start streaming: ${messageOf(error)}`, { cause: error })
  }
  if (typeof stream?.getReader !== 'function') throw subagentError('ERR_SUBAGENT_MODEL_STREAM', `${name}'s doStream did not resolve to { stream: ReadableStream }`)
  yield* toStreamChunks(stream, signal, name)
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
