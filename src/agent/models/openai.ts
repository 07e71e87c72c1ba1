/**
 * A model over any OpenAI-compatible Chat Completions endpoint, streamed, on the official `openai`
 * client (its SSE framing and typed errors) under the shared request policy (retry.ts): retries
 * with backoff and jitter that honour `retry-after`, a silence timeout and a concurrency bound.
 * Register it on the host (`host.models.register`) so its key, its connections and its
 * concurrency limit stay in the main thread and serve every child.
 *
 * A failed call never reads as success: an HTTP error, an error sent inside the stream, a
 * timeout, a lost connection and a stream that ends before the model finished all throw, so the
 * turn ends `error` with a diagnostic naming the status or the cause (never the key).
 */
import type OpenAI from 'openai'
import type { ClientOptions } from 'openai'
import type { ChatCompletionCreateParamsStreaming, ChatCompletionMessageParam } from 'openai/resources/chat/completions'
import type { StreamChunk } from '../../protocol/shapes/stream.js'
import { addressOf, answeredWith, isRetryableStatus, lostConnection, networkCauseOf, providerMessage, retryAfterOf } from './endpoint-failure.js'
import type { Model, ModelMessage, ModelRequest } from './model.js'
import { RequestPolicy, type AttemptState, type Failure, type RequestPolicyOptions } from './retry.js'
import { subagentError } from '../../protocol/errors.js'

export interface OpenAICompatibleOptions extends RequestPolicyOptions {
  /** e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8080/v1`. */
  baseUrl: string
  /**
   * Sent as a bearer token; without one (left out, or `undefined`: `process.env.OPENAI_API_KEY`
   * as it is) no `Authorization` header is sent (the environment is never read).
   */
  apiKey?: string | undefined
  headers?: Record<string, string>
  /** Merged into every request body: temperature, `tool_choice`, `response_format`, any field a compatible server takes. The request's own fields win. */
  body?: Record<string, unknown>
  /** The field that carries `maxTokens`: `max_tokens` (default) or `max_completion_tokens` (OpenAI's reasoning models). */
  maxTokensField?: 'max_tokens' | 'max_completion_tokens'
}

const FINISH: Record<string, 'stop' | 'tool-calls' | 'max-tokens' | 'refusal'> = {
  stop: 'stop',
  tool_calls: 'tool-calls',
  function_call: 'tool-calls',
  length: 'max-tokens',
  content_filter: 'refusal',
}

type OpenAIModule = typeof import('openai')
/** The client is loaded on first use: it takes ~100 ms to import, and most hosts (and every worker thread importing this library) never call it. */
let loading: Promise<OpenAIModule> | undefined
const openai = (): Promise<OpenAIModule> => (loading ??= import('openai'))

export class OpenAICompatibleModel implements Model {
  readonly #clientOptions: ClientOptions
  #client: OpenAI | undefined
  readonly #address: string
  readonly #body: Record<string, unknown>
  readonly #maxTokensField: 'max_tokens' | 'max_completion_tokens'
  readonly #policy: RequestPolicy
  /** What this model sends that is secret: its key and header values, blanked wherever an error echoes them. */
  readonly #secrets: string[]

  constructor(options: OpenAICompatibleOptions) {
    const { baseUrl, apiKey, headers = {}, body = {}, maxTokensField = 'max_tokens' } = checkOptions(options)
    this.#policy = new RequestPolicy(options, 'OpenAICompatibleModel')
    this.#secrets = [apiKey, ...Object.values(headers)].filter((value): value is string => typeof value === 'string' && value.length >= 8)
    this.#address = addressOf(baseUrl)
    this.#body = body
    this.#maxTokensField = maxTokensField
    this.#clientOptions = {
      baseURL: baseUrl,
      // The client would otherwise read OPENAI_API_KEY (and the organization and project) from the
      // environment, and send a user's OpenAI key to whatever endpoint this is.
      apiKey: apiKey ?? 'no-key',
      organization: null,
      project: null,
      defaultHeaders: apiKey === undefined ? { ...headers, authorization: null } : headers,
      // Retries and the silence watchdog are the shared policy's (retry.ts), so that both adapters
      // follow one policy, and so that a request is never resent once a chunk has reached the child.
      maxRetries: 0,
      timeout: 2 ** 31 - 1,
      logLevel: 'off',
    }
  }

  async *stream(request: ModelRequest): AsyncGenerator<StreamChunk> {
    const sdk = await openai()
    this.#client ??= new sdk.OpenAI(this.#clientOptions)
    yield* this.#policy.run(request.signal, (signal) => this.#attempt(this.#client!, request, signal), (error, state) => this.#masked(this.#judge(sdk, error, state)))
  }

  /** An endpoint may echo the key it was sent in its error, however the key looks: it is blanked by value. */
  #masked(failure: Failure | undefined): Failure | undefined {
    if (!failure) return failure
    let { message } = failure
    for (const secret of this.#secrets) message = message.split(secret).join('[redacted]')
    return { ...failure, message }
  }

  async *#attempt(client: OpenAI, request: ModelRequest, signal: AbortSignal): AsyncGenerator<StreamChunk> {
    const completion = await client.chat.completions.create(this.#bodyOf(request), { signal })
    const calls = new Map<number, { id: string; name: string; arguments: string }>()
    let finish: StreamChunk | undefined
    // A refusal streams in its own deltas; the finish that follows may say only 'stop'.
    let refused = false
    for await (const chunk of completion) {
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
    // The client ends a stream quietly when its signal aborts: the policy says which abort it was.
    if (signal.aborted) return
    if (!finish) throw subagentError('ERR_SUBAGENT_MODEL_STREAM', "the model endpoint's stream ended before the model finished (no finish_reason): the answer may be cut off")
    // Arguments arrive in pieces; a call is whole only once the stream says so.
    for (const call of [...calls.entries()].sort(([a], [b]) => a - b).map(([, c]) => c)) yield { type: 'tool-call', ...call }
    yield finish
  }

  /**
   * What a failed attempt says. For an HTTP error, its status, type and code, and the provider's
   * message with anything that looks like a key masked (error bodies can echo the request back).
   */
  #judge(sdk: OpenAIModule, error: unknown, { started }: AttemptState): Failure | undefined {
    const { APIConnectionError, APIError } = sdk
    const lost = error instanceof APIConnectionError || !(error instanceof APIError) ? networkCauseOf(error) : undefined
    if (lost) return { message: lostConnection(this.#address, lost, started), retryable: true }
    if (error instanceof APIConnectionError) return { message: `could not reach the model endpoint ${this.#address}: ${innermostMessage(error)}`, retryable: true }
    if (error instanceof APIError) {
      const kind = kindOf(error.error)
      if (!error.status) {
        const said = providerMessage(messageOf(error.error))
        return { message: `the model endpoint sent an error inside its stream${said ? `: ${said}` : ''}${kind}`, retryable: false }
      }
      const retryAfterMs = retryAfterOf((name) => error.headers?.get(name))
      return {
        message: `${answeredWith(error.status, messageOf(error.error))}${kind}`,
        retryable: isRetryableStatus(error.status),
        status: error.status,
        ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
      }
    }
    if (error instanceof SyntaxError) return { message: 'the model endpoint sent a stream event that is not JSON', retryable: false }
    return undefined
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

/** The error's type and code only, when they are short identifiers. */
function kindOf(body: unknown): string {
  const { type, code } = (typeof body === 'object' && body !== null ? body : {}) as { type?: unknown; code?: unknown }
  const kind = [type, code].filter((part): part is string => typeof part === 'string' && /^[\w.-]{1,64}$/.test(part))
  return kind.length > 0 ? ` (${kind.join(', ')})` : ''
}

/** What the deepest cause says (`bad port`, where the client says only `Connection error.`). */
function innermostMessage(error: Error): string {
  let message = error.message
  for (let cause: unknown = error.cause, depth = 0; cause instanceof Error && depth < 8; cause = cause.cause, depth++) message = cause.message
  return message
}

/** The provider's message in an OpenAI-style error body: `{ message }`, or the body itself when it is text. */
function messageOf(body: unknown): unknown {
  return typeof body === 'object' && body !== null ? (body as { message?: unknown }).message : body
}

function toMessage(message: ModelMessage): ChatCompletionMessageParam {
  const text = message.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('')
  if (message.role === 'tool') return { role: 'tool', tool_call_id: message.callId, content: text }
  if (message.role === 'user') return { role: 'user', content: text }
  const calls = message.content.flatMap((b) => (b.type === 'tool-call' ? [{ id: b.id, type: 'function' as const, function: { name: b.name, arguments: b.arguments } }] : []))
  return calls.length > 0 ? { role: 'assistant', content: text || null, tool_calls: calls } : { role: 'assistant', content: text }
}

function checkOptions(options: OpenAICompatibleOptions): OpenAICompatibleOptions {
  if (typeof options !== 'object' || options === null) throw subagentError('ERR_SUBAGENT_ARGUMENT', 'OpenAICompatibleModel needs an options object with a baseUrl')
  const { baseUrl, apiKey, headers, body, maxTokensField } = options
  if (typeof baseUrl !== 'string' || !/^https?:\/\//.test(baseUrl)) throw subagentError('ERR_SUBAGENT_ARGUMENT', 'OpenAICompatibleModel needs a baseUrl starting with http:// or https://')
  // fetch refuses such a URL on every request, and its message quotes the password.
  if (carriesCredentials(baseUrl)) {
    throw subagentError('ERR_SUBAGENT_ARGUMENT', 'OpenAICompatibleModel baseUrl must not carry credentials (user:password@): give the key as apiKey, or in headers')
  }
  if (apiKey !== undefined && (typeof apiKey !== 'string' || apiKey === '')) throw subagentError('ERR_SUBAGENT_ARGUMENT', 'OpenAICompatibleModel apiKey must be a non-empty string when given: leave it out (undefined) to send no Authorization header')
  if (headers !== undefined && !isRecord(headers)) throw subagentError('ERR_SUBAGENT_ARGUMENT', 'OpenAICompatibleModel headers must be an object of header names to strings')
  if (body !== undefined && !isRecord(body)) throw subagentError('ERR_SUBAGENT_ARGUMENT', 'OpenAICompatibleModel body must be an object of request fields')
  if (maxTokensField !== undefined && maxTokensField !== 'max_tokens' && maxTokensField !== 'max_completion_tokens') {
    throw subagentError('ERR_SUBAGENT_ARGUMENT', "OpenAICompatibleModel maxTokensField must be 'max_tokens' or 'max_completion_tokens'")
  }
  return options
}

function carriesCredentials(url: string): boolean {
  if (!URL.canParse(url)) return false
  const { username, password } = new URL(url)
  return username !== '' || password !== ''
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
