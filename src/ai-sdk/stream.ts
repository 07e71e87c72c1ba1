/**
 * AI SDK stream parts (spec v2, v3 or v4) as library stream chunks. Text deltas and whole tool calls
 * pass; usage and the finish reason are normalised (v2: numbers and a string, v3 and v4: token objects
 * and `{ unified, raw }`); everything else (reasoning, tool-input deltas, sources, metadata) is
 * not part of a library step and is skipped. Anything that is not a clean finish throws.
 */
import type { FinishReason, StreamChunk } from '../index.js'
import type { StreamPartLike } from './language-model.js'
import { messageOf, subagentError } from '../protocol/errors.js'

const FINISH: Record<string, FinishReason> = {
  stop: 'stop',
  length: 'max-tokens',
  'tool-calls': 'tool-calls',
  'content-filter': 'refusal',
}

/** `name` names the model in every error message. */
export async function* toStreamChunks(stream: ReadableStream<StreamPartLike>, signal: AbortSignal, name: string): AsyncGenerator<StreamChunk> {
  let finished = false
  for await (const part of readParts(stream, signal, name)) {
    const fields = part as unknown as Record<string, unknown>
    switch (part.type) {
      case 'text-delta': {
        const delta = fields['delta']
        if (typeof delta !== 'string') throw subagentError('ERR_SUBAGENT_MODEL_STREAM', `${name} sent a text-delta part without a string "delta"`)
        if (delta !== '') yield { type: 'text-delta', text: delta }
        break
      }
      case 'tool-call': {
        // A provider-executed call (a provider's own web search, say) already ran there.
        if (fields['providerExecuted'] === true) break
        const { toolCallId, toolName, input } = fields
        if (typeof toolCallId !== 'string' || typeof toolName !== 'string') throw subagentError('ERR_SUBAGENT_MODEL_STREAM', `${name} sent a tool-call part without a string toolCallId and toolName`)
        yield { type: 'tool-call', id: toolCallId, name: toolName, arguments: typeof input === 'string' ? input : (JSON.stringify(input) ?? '') }
        break
      }
      case 'error':
        throw subagentError('ERR_SUBAGENT_MODEL_STREAM', `${name} reported an error in its stream: ${messageOf(fields['error'])}`, { cause: fields['error'] })
      case 'finish': {
        const usage = usageOf(fields['usage'])
        if (usage) yield usage
        yield { type: 'finish', reason: finishOf(fields['finishReason'], name) }
        finished = true
        break
      }
    }
  }
  if (!finished) throw subagentError('ERR_SUBAGENT_MODEL_STREAM', `${name}'s stream ended without a finish part, so the step may be incomplete`)
}

/** Reads the stream; the signal cancels it at once, even while a read is pending. */
async function* readParts(stream: ReadableStream<StreamPartLike>, signal: AbortSignal, name: string): AsyncGenerator<StreamPartLike> {
  const reader = stream.getReader()
  const cancel = () => void reader.cancel(signal.reason).catch(() => {})
  signal.addEventListener('abort', cancel, { once: true })
  let done = false
  try {
    for (;;) {
      if (signal.aborted) throw signal.reason
      const next = await reader.read().catch((error: unknown) => {
        if (signal.aborted) throw signal.reason
        throw subagentError('ERR_SUBAGENT_MODEL_STREAM', `${name}'s stream failed: ${messageOf(error)}`, { cause: error })
      })
      if (signal.aborted) throw signal.reason
      if (next.done) {
        done = true
        return
      }
      const part: unknown = next.value
      if (typeof part !== 'object' || part === null || typeof (part as StreamPartLike).type !== 'string') {
        throw subagentError('ERR_SUBAGENT_MODEL_STREAM', `${name} sent a stream part that is not an object with a string "type"`)
      }
      yield part as StreamPartLike
    }
  } finally {
    signal.removeEventListener('abort', cancel)
    // Stopped early (an error, a consumer that went away): the provider may stop producing.
    if (!done && !signal.aborted) cancelQuietly(reader)
  }
}

function cancelQuietly(reader: ReadableStreamDefaultReader<StreamPartLike>): void {
  reader.cancel().catch(() => {})
}

function usageOf(usage: unknown): StreamChunk | undefined {
  if (typeof usage !== 'object' || usage === null) return undefined
  const { inputTokens, outputTokens } = usage as Record<string, unknown>
  const input = tokens(inputTokens)
  const output = tokens(outputTokens)
  if (input === undefined && output === undefined) return undefined
  return { type: 'usage', inputTokens: input ?? 0, outputTokens: output ?? 0 }
}

/** v2 counts tokens as a number, v3 and v4 as `{ total, ... }`; either may be unknown. */
function tokens(count: unknown): number | undefined {
  const total = typeof count === 'object' && count !== null ? (count as { total?: unknown }).total : count
  return typeof total === 'number' && Number.isFinite(total) && total >= 0 ? total : undefined
}

/** v2 gives the reason as a string, v3 and v4 as `{ unified, raw }`. */
function finishOf(reason: unknown, name: string): FinishReason {
  const unified = typeof reason === 'object' && reason !== null ? (reason as { unified?: unknown }).unified : reason
  const raw = typeof reason === 'object' && reason !== null ? (reason as { raw?: unknown }).raw : undefined
  const mapped = typeof unified === 'string' ? FINISH[unified] : undefined
  if (mapped) return mapped
  const said = typeof raw === 'string' ? ` (the provider said "${raw}")` : ''
  throw subagentError('ERR_SUBAGENT_MODEL_STREAM',
    `${name} finished with reason ${JSON.stringify(unified) ?? 'undefined'}${said}, which a library step cannot express (only stop, length, tool-calls and content-filter can), so the step fails instead of passing as a success`,
  )
}
