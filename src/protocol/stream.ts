/** Stream chunks: what a model emits for one request. They cross threads for host-placed models. */
import { union, variant } from './schema.js'

export type FinishReason = 'stop' | 'tool-calls' | 'max-tokens' | 'refusal'

export type StreamChunk =
  | { type: 'text-delta'; text: string }
  | { type: 'tool-call'; id: string; name: string; arguments: string }
  | { type: 'usage'; inputTokens: number; outputTokens: number }
  | { type: 'finish'; reason: FinishReason }

export const streamChunkSchema = union('subagent-worker/stream-chunk', [
  variant('text-delta', { text: { type: 'string' } }),
  variant('tool-call', { id: { type: 'string' }, name: { type: 'string' }, arguments: { type: 'string' } }),
  variant('usage', { inputTokens: { type: 'number', minimum: 0 }, outputTokens: { type: 'number', minimum: 0 } }),
  variant('finish', { reason: { enum: ['stop', 'tool-calls', 'max-tokens', 'refusal'] } }),
])
