/**
 * A model over any OpenAI-compatible Chat Completions endpoint, streamed (server-sent events).
 * Register it on the host (`host.models.register`) so its key and connections stay in the main
 * thread; worker children reach it over the RPC.
 */
import type { StreamChunk } from '../protocol/stream.js'
import type { Model, ModelMessage, ModelRequest } from './model.js'

export interface OpenAICompatibleOptions {
  /** e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8080/v1`. */
  baseUrl: string
  apiKey?: string
  headers?: Record<string, string>
}

interface ToolCallDelta {
  index: number
  id?: string
  function?: { name?: string; arguments?: string }
}

interface CompletionChunk {
  choices?: Array<{ delta?: { content?: string | null; refusal?: string | null; tool_calls?: ToolCallDelta[] }; finish_reason?: string | null }>
  usage?: { prompt_tokens?: number; completion_tokens?: number } | null
}

const FINISH: Record<string, 'stop' | 'tool-calls' | 'max-tokens' | 'refusal'> = {
  stop: 'stop',
  tool_calls: 'tool-calls',
  function_call: 'tool-calls',
  length: 'max-tokens',
  content_filter: 'refusal',
}

export class OpenAICompatibleModel implements Model {
  readonly #url: string
  readonly #headers: Record<string, string>

  constructor(options: OpenAICompatibleOptions) {
    if (typeof options?.baseUrl !== 'string' || !/^https?:\/\//.test(options.baseUrl)) {
      throw new TypeError('OpenAICompatibleModel needs a baseUrl starting with http:// or https://')
    }
    this.#url = `${options.baseUrl.replace(/\/+$/, '')}/chat/completions`
    this.#headers = { 'content-type': 'application/json', accept: 'text/event-stream', ...options.headers }
    if (options.apiKey) this.#headers.authorization = `Bearer ${options.apiKey}`
  }

  async *stream(request: ModelRequest): AsyncGenerator<StreamChunk> {
    const response = await fetch(this.#url, { method: 'POST', headers: this.#headers, body: JSON.stringify(toBody(request)), signal: request.signal })
    if (!response.ok || !response.body) throw new Error(`the model endpoint answered HTTP ${response.status}${await errorKind(response)}`)
    const calls = new Map<number, { id: string; name: string; arguments: string }>()
    let finish: StreamChunk | undefined
    // A refusal streams in its own deltas; the finish that follows may say only 'stop'.
    let refused = false
    for await (const data of events(response.body)) {
      if (data === '[DONE]') break
      const chunk = JSON.parse(data) as CompletionChunk
      const choice = chunk.choices?.[0]
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
    // Arguments arrive in pieces; a call is whole only once the stream says so.
    for (const call of [...calls.entries()].sort(([a], [b]) => a - b).map(([, c]) => c)) yield { type: 'tool-call', ...call }
    if (finish) yield finish
  }
}

/**
 * The error's type and code only: error bodies can echo the request back, and this text ends up
 * in diagnostics.
 */
async function errorKind(response: Response): Promise<string> {
  try {
    const { error } = (await response.json()) as { error?: { type?: unknown; code?: unknown } }
    const kind = [error?.type, error?.code].filter((part) => typeof part === 'string' && /^[\w.-]{1,64}$/.test(part))
    return kind.length > 0 ? ` (${kind.join(', ')})` : ''
  } catch {
    return ''
  }
}

function toBody(request: ModelRequest): object {
  const messages: object[] = request.system ? [{ role: 'system', content: request.system }] : []
  for (const message of request.messages) messages.push(toMessage(message))
  const body: Record<string, unknown> = { model: request.model, messages, stream: true, stream_options: { include_usage: true } }
  if (request.tools) body.tools = request.tools.map((tool) => ({ type: 'function', function: tool }))
  if (request.maxTokens !== undefined) body.max_tokens = request.maxTokens
  return body
}

function toMessage(message: ModelMessage): object {
  const text = message.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('')
  if (message.role === 'tool') return { role: 'tool', tool_call_id: message.callId, content: text }
  if (message.role === 'user') return { role: 'user', content: text }
  const calls = message.content.flatMap((b) => (b.type === 'tool-call' ? [{ id: b.id, type: 'function', function: { name: b.name, arguments: b.arguments } }] : []))
  return calls.length > 0 ? { role: 'assistant', content: text || null, tool_calls: calls } : { role: 'assistant', content: text }
}

/** The `data:` payloads of a server-sent event stream. */
async function* events(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder()
  let buffer = ''
  for await (const bytes of body) {
    buffer += decoder.decode(bytes, { stream: true }).replace(/\r\n/g, '\n')
    let end: number
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const data = dataOf(buffer.slice(0, end))
      buffer = buffer.slice(end + 2)
      if (data) yield data
    }
  }
  // A last event the server did not close with a blank line still counts.
  const data = dataOf(buffer)
  if (data) yield data
}

function dataOf(event: string): string {
  return event
    .split('\n')
    .filter((line) => line.startsWith('data:'))
    .map((line) => line.slice(5).trimStart())
    .join('\n')
}
