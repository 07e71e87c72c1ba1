/**
 * ScriptedModel: a deterministic model for tests, demos and benchmarks. Each request consumes the
 * next script entry; every request is recorded (its messages as they were), signal included.
 */
import type { StreamChunk } from '../../protocol/shapes/stream.js'
import type { Model, ModelRequest } from './model.js'
import { sleep } from './sleep.js'
import { subagentError } from '../../protocol/errors.js'

export type ScriptEntry =
  | StreamChunk[]
  | ((request: ModelRequest) => StreamChunk[] | Promise<StreamChunk[]>)
  /** Streams the text `partial`, then waits for the request's signal and throws its reason. */
  | 'hang'
  /** Streams these chunks, then waits for the request's signal. */
  | { hangAfter: StreamChunk[] }
  /** Waits (abortably), then streams these chunks. */
  | { delayMs: number; chunks: StreamChunk[] }
  /** Streams these chunks one at a time, waiting `intervalMs` (abortably) before each: a model that streams at a steady pace. */
  | { intervalMs: number; chunks: StreamChunk[] }

export class ScriptedModel implements Model {
  readonly requests: ModelRequest[] = []
  readonly #script: ScriptEntry[]

  constructor(script: ScriptEntry[]) {
    if (!Array.isArray(script)) throw subagentError('ERR_SUBAGENT_ARGUMENT', 'ScriptedModel needs an array of script entries')
    this.#script = [...script]
  }

  /** How many entries are still unused. */
  get remaining(): number {
    return this.#script.length - this.requests.length
  }

  async *stream(request: ModelRequest): AsyncGenerator<StreamChunk> {
    const index = this.requests.length
    // The loop's message list keeps growing after this request: record it as it was.
    this.requests.push({ ...request, messages: [...request.messages] })
    const entry = this.#script[index]
    if (entry === undefined) {
      throw subagentError('ERR_SUBAGENT_SCRIPT_EXHAUSTED', `ScriptedModel script exhausted: request ${index + 1} has no entry (the script has ${this.#script.length})`)
    }
    const { signal } = request
    throwIfAborted(signal)
    if (entry === 'hang') {
      yield { type: 'text-delta', text: 'partial' }
      await untilAborted(signal)
    } else if (Array.isArray(entry)) {
      yield* entry
    } else if (typeof entry === 'function') {
      yield* await entry(request)
    } else if ('hangAfter' in entry) {
      yield* entry.hangAfter
      await untilAborted(signal)
    } else if ('intervalMs' in entry) {
      for (const chunk of entry.chunks) {
        await sleep(entry.intervalMs, signal)
        yield chunk
      }
    } else {
      await sleep(entry.delayMs, signal)
      yield* entry.chunks
    }
    throwIfAborted(signal)
  }
}

function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw signal.reason
}

function untilAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) return reject(signal.reason)
    signal.addEventListener('abort', () => reject(signal.reason), { once: true })
  })
}

const usage = (text: string): StreamChunk => ({ type: 'usage', inputTokens: 0, outputTokens: Math.ceil(text.length / 4) })

export function textResponse(text: string): StreamChunk[] {
  return [{ type: 'text-delta', text }, usage(text), { type: 'finish', reason: 'stop' }]
}

/** The model hit its output cap after streaming `text` (possibly empty). */
export function maxTokensResponse(text = ''): StreamChunk[] {
  const chunks: StreamChunk[] = text ? [{ type: 'text-delta', text }] : []
  return [...chunks, usage(text), { type: 'finish', reason: 'max-tokens' }]
}

export function refusalResponse(text = ''): StreamChunk[] {
  const chunks: StreamChunk[] = text ? [{ type: 'text-delta', text }] : []
  return [...chunks, { type: 'finish', reason: 'refusal' }]
}

/** One tool call; `args` is serialized unless it is already a string (which may be malformed on purpose). */
export function toolCallResponse(id: string, name: string, args: unknown, text?: string): StreamChunk[] {
  const chunks: StreamChunk[] = text ? [{ type: 'text-delta', text }] : []
  const serialized = typeof args === 'string' ? args : JSON.stringify(args)
  return [...chunks, { type: 'tool-call', id, name, arguments: serialized }, usage(serialized), { type: 'finish', reason: 'tool-calls' }]
}

/** Several tool calls in one response, in this order. */
export function toolCallsResponse(calls: ReadonlyArray<{ id: string; name: string; args: unknown }>, text?: string): StreamChunk[] {
  const chunks: StreamChunk[] = text ? [{ type: 'text-delta', text }] : []
  for (const call of calls) {
    chunks.push({ type: 'tool-call', id: call.id, name: call.name, arguments: typeof call.args === 'string' ? call.args : JSON.stringify(call.args) })
  }
  return [...chunks, { type: 'finish', reason: 'tool-calls' }]
}
