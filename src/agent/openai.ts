/**
 * A model over any OpenAI-compatible Chat Completions endpoint, streamed, on the official `openai`
 * client: its SSE framing, typed errors, retries with backoff and jitter that honour
 * `retry-after`, and timeouts. Register it on the host (`host.models.register`) so its key, its
 * connections and its concurrency limit stay in the main thread and serve every child.
 *
 * A failed call never reads as success: an HTTP error, an error sent inside the stream, a
 * timeout, a lost connection and a stream that ends before the model finished all throw, so the
 * turn ends `error` with a diagnostic naming the status or the cause (never the key).
 */
import type OpenAI from 'openai'
import type { ClientOptions } from 'openai'
import type { ChatCompletionChunk, ChatCompletionCreateParamsStreaming, ChatCompletionMessageParam } from 'openai/resources/chat/completions'
import type { StreamChunk } from '../protocol/stream.js'
import type { Model, ModelMessage, ModelRequest } from './model.js'
import { Slots } from './slots.js'

export interface OpenAICompatibleOptions {
  /** e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8080/v1`. */
  baseUrl: string
  /** Sent as a bearer token; without one no `Authorization` header is sent (the environment is never read). */
  apiKey?: string
  headers?: Record<string, string>
  /** Retries of a request that failed before its stream began (429, 5xx, a lost connection), with backoff and jitter, honouring `retry-after`. Default 2. */
  maxRetries?: number
  /** How long the endpoint may stay silent: before its response begins, and between two streamed chunks. Default 600000 (10 minutes). */
  timeoutMs?: number
  /** Merged into every request body: temperature, `tool_choice`, `response_format`, any field a compatible server takes. The request's own fields win. */
  body?: Record<string, unknown>
  /** The field that carries `maxTokens`: `max_tokens` (default) or `max_completion_tokens` (OpenAI's reasoning models). */
  maxTokensField?: 'max_tokens' | 'max_completion_tokens'
  /** Requests in flight at once, across every child using this model; more wait their turn. Default: no limit. */
  maxConcurrency?: number
}

const FINISH: Record<string, 'stop' | 'tool-calls' | 'max-tokens' | 'refusal'> = {
  stop: 'stop',
  tool_calls: 'tool-calls',
  function_call: 'tool-calls',
  length: 'max-tokens',
  content_filter: 'refusal',
}

const DEFAULT_TIMEOUT_MS = 600_000

type OpenAIModule = typeof import('openai')
/** The client is loaded on first use: it takes ~100 ms to import, and most hosts (and every worker thread importing this library) never call it. */
let loading: Promise<OpenAIModule> | undefined
const openai = (): Promise<OpenAIModule> => (loading ??= import('openai'))

export class OpenAICompatibleModel implements Model {
  readonly #clientOptions: ClientOptions
  #client: OpenAI | undefined
  readonly #timeoutMs: number
  readonly #body: Record<string, unknown>
  readonly #maxTokensField: 'max_tokens' | 'max_completion_tokens'
  readonly #slots: Slots | undefined

  constructor(options: OpenAICompatibleOptions) {
    const { baseUrl, apiKey, headers = {}, maxRetries = 2, timeoutMs = DEFAULT_TIMEOUT_MS, body = {}, maxTokensField = 'max_tokens', maxConcurrency } = checkOptions(options)
    this.#timeoutMs = timeoutMs
    this.#body = body
    this.#maxTokensField = maxTokensField
    this.#slots = maxConcurrency === undefined ? undefined : new Slots(maxConcurrency)
    this.#clientOptions = {
      baseURL: baseUrl,
      // The client would otherwise read OPENAI_API_KEY (and the organization and project) from the
      // environment, and send a user's OpenAI key to whatever endpoint this is.
      apiKey: apiKey ?? 'no-key',
      organization: null,
      project: null,
      defaultHeaders: apiKey === undefined ? { ...headers, authorization: null } : headers,
      maxRetries,
      timeout: timeoutMs,
      logLevel: 'off',
    }
  }

  async *stream(request: ModelRequest): AsyncGenerator<StreamChunk> {
    const release = await this.#slots?.acquire(request.signal)
    try {
      yield* this.#stream(request)
    } finally {
      release?.()
    }
  }

  async *#stream(request: ModelRequest): AsyncGenerator<StreamChunk> {
    const sdk = await openai()
    this.#client ??= new sdk.OpenAI(this.#clientOptions)
    const silence = new Silence(this.#timeoutMs, request.signal)
    try {
      let completion: AsyncIterable<ChatCompletionChunk>
      try {
        completion = await this.#client.chat.completions.create(this.#bodyOf(request), { signal: silence.signal })
      } catch (error) {
        throw failure(sdk, error, this.#timeoutMs)
      }
      const calls = new Map<number, { id: string; name: string; arguments: string }>()
      let finish: StreamChunk | undefined
      // A refusal streams in its own deltas; the finish that follows may say only 'stop'.
      let refused = false
      try {
        silence.arm()
        for await (const chunk of completion) {
          silence.arm()
          const choice = chunk.choices[0]
          const delta = choice?.delta
          if (delta?.content) yield { type: 'text-delta', text: delta.content }
          if (delta?.refusal) {
            refused = true
            yield { type: 'text-delta', text: delta.refusal }
          }
          for (const part of delta?.tool_calls ?? []) {
            const call = calls.get(part.index) ?? { id: '', name: '', arguments: '' }
            call.id ||= part.id ?? ''
            call.name += part.function?.name ?? ''
            call.arguments += part.function?.arguments ?? ''
            calls.set(part.index, call)
          }
          if (choice?.finish_reason) finish = { type: 'finish', reason: refused ? 'refusal' : (FINISH[choice.finish_reason] ?? 'stop') }
          if (chunk.usage) yield { type: 'usage', inputTokens: chunk.usage.prompt_tokens ?? 0, outputTokens: chunk.usage.completion_tokens ?? 0 }
        }
      } catch (error) {
        throw failure(sdk, error, this.#timeoutMs)
      }
      // The client ends a stream quietly when its signal aborts: say which abort it was.
      if (request.signal.aborted) return
      if (silence.expired) throw new Error(`the model endpoint sent nothing for ${this.#timeoutMs} ms (timeoutMs), so the request was abandoned`)
      if (!finish) throw new Error("the model endpoint's stream ended before the model finished (no finish_reason): the answer may be cut off")
      // Arguments arrive in pieces; a call is whole only once the stream says so.
      for (const call of [...calls.entries()].sort(([a], [b]) => a - b).map(([, c]) => c)) yield { type: 'tool-call', ...call }
      yield finish
    } finally {
      silence.dispose()
    }
  }

  #bodyOf(request: ModelRequest): ChatCompletionCreateParamsStreaming {
    const messages: ChatCompletionMessageParam[] = request.system ? [{ role: 'system', content: request.system }] : []
    for (const message of request.messages) messages.push(toMessage(message))
    const body: Record<string, unknown> = { ...this.#body, model: request.model, messages, stream: true, stream_options: { include_usage: true } }
    if (request.tools) body.tools = request.tools.map((tool) => ({ type: 'function', function: tool }))
    if (request.maxTokens !== undefined) body[this.#maxTokensField] = request.maxTokens
    return body as unknown as ChatCompletionCreateParamsStreaming
  }
}

/**
 * The request's own abort signal, plus a watchdog: when the endpoint stays silent for `ms`
 * (before answering, or between two chunks), the request is aborted and `expired` says so.
 */
class Silence {
  readonly #controller = new AbortController()
  readonly #ms: number
  readonly #parent: AbortSignal
  readonly #onAbort = () => this.#controller.abort(this.#parent.reason)
  #timer: NodeJS.Timeout | undefined
  #heardAt = 0
  expired = false

  constructor(ms: number, parent: AbortSignal) {
    this.#ms = ms
    this.#parent = parent
    if (parent.aborted) this.#onAbort()
    else parent.addEventListener('abort', this.#onAbort, { once: true })
  }

  get signal(): AbortSignal {
    return this.#controller.signal
  }

  /**
   * Notes that the endpoint spoke (and starts the watchdog). One timer serves the whole stream: when
   * it fires it checks the time since the last chunk, and waits again for what is left.
   */
  arm(): void {
    this.#heardAt = performance.now()
    this.#timer ??= setTimeout(this.#check, this.#ms)
  }

  readonly #check = (): void => {
    const silent = performance.now() - this.#heardAt
    if (silent < this.#ms) {
      this.#timer = setTimeout(this.#check, this.#ms - silent)
      return
    }
    this.expired = true
    this.#controller.abort(new Error('timeout'))
  }

  dispose(): void {
    clearTimeout(this.#timer)
    this.#parent.removeEventListener('abort', this.#onAbort)
  }
}

/**
 * What a failed call says. Never the error's own message for an HTTP error: error bodies can echo
 * the request (and its key) back, and this text ends up in diagnostics; the status, type and code
 * name the cause.
 */
function failure(sdk: OpenAIModule, error: unknown, timeoutMs: number): unknown {
  const { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } = sdk
  if (error instanceof APIUserAbortError) return error
  if (error instanceof APIConnectionTimeoutError) return new Error(`the model endpoint did not answer within ${timeoutMs} ms (timeoutMs), after its retries`)
  if (error instanceof APIConnectionError) return new Error(`could not reach the model endpoint${causeOf(error)}, after its retries`)
  if (error instanceof APIError) {
    const kind = kindOf(error.error)
    return new Error(error.status ? `the model endpoint answered HTTP ${error.status}${kind}` : `the model endpoint sent an error inside its stream${kind}`)
  }
  if (error instanceof SyntaxError) return new Error('the model endpoint sent a stream event that is not JSON')
  return error
}

/** The error's type and code only, when they are short identifiers. */
function kindOf(body: unknown): string {
  const { type, code } = (typeof body === 'object' && body !== null ? body : {}) as { type?: unknown; code?: unknown }
  const kind = [type, code].filter((part): part is string => typeof part === 'string' && /^[\w.-]{1,64}$/.test(part))
  return kind.length > 0 ? ` (${kind.join(', ')})` : ''
}

/** The system error code under a lost connection (ECONNREFUSED, ENOTFOUND, ...), when there is one. */
function causeOf(error: Error): string {
  for (let cause: unknown = error.cause; cause; cause = (cause as { cause?: unknown }).cause) {
    const code = (cause as { code?: unknown }).code
    if (typeof code === 'string' && /^[A-Z_]{3,40}$/.test(code)) return ` (${code})`
  }
  return ''
}

function toMessage(message: ModelMessage): ChatCompletionMessageParam {
  const text = message.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('')
  if (message.role === 'tool') return { role: 'tool', tool_call_id: message.callId, content: text }
  if (message.role === 'user') return { role: 'user', content: text }
  const calls = message.content.flatMap((b) => (b.type === 'tool-call' ? [{ id: b.id, type: 'function' as const, function: { name: b.name, arguments: b.arguments } }] : []))
  return calls.length > 0 ? { role: 'assistant', content: text || null, tool_calls: calls } : { role: 'assistant', content: text }
}

function checkOptions(options: OpenAICompatibleOptions): OpenAICompatibleOptions {
  if (typeof options !== 'object' || options === null) throw new TypeError('OpenAICompatibleModel needs an options object with a baseUrl')
  const { baseUrl, apiKey, headers, maxRetries, timeoutMs, body, maxTokensField, maxConcurrency } = options
  if (typeof baseUrl !== 'string' || !/^https?:\/\//.test(baseUrl)) throw new TypeError('OpenAICompatibleModel needs a baseUrl starting with http:// or https://')
  if (apiKey !== undefined && (typeof apiKey !== 'string' || apiKey === '')) throw new TypeError('OpenAICompatibleModel apiKey must be a non-empty string when given')
  if (headers !== undefined && !isRecord(headers)) throw new TypeError('OpenAICompatibleModel headers must be an object of header names to strings')
  if (maxRetries !== undefined && !(Number.isSafeInteger(maxRetries) && maxRetries >= 0)) throw new TypeError('OpenAICompatibleModel maxRetries must be a whole number >= 0')
  if (timeoutMs !== undefined && !(Number.isSafeInteger(timeoutMs) && timeoutMs > 0 && timeoutMs <= 2 ** 31 - 1)) {
    throw new TypeError('OpenAICompatibleModel timeoutMs must be a whole number of milliseconds from 1 to 2147483647')
  }
  if (body !== undefined && !isRecord(body)) throw new TypeError('OpenAICompatibleModel body must be an object of request fields')
  if (maxTokensField !== undefined && maxTokensField !== 'max_tokens' && maxTokensField !== 'max_completion_tokens') {
    throw new TypeError("OpenAICompatibleModel maxTokensField must be 'max_tokens' or 'max_completion_tokens'")
  }
  if (maxConcurrency !== undefined && !(Number.isSafeInteger(maxConcurrency) && maxConcurrency >= 1)) throw new TypeError('OpenAICompatibleModel maxConcurrency must be a whole number >= 1')
  return options
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
