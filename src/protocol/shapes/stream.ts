/** Stream chunks: what a model emits for one request. They cross threads for host-placed models. */
import { string, union, variant, type Wire } from '../schema.js'
import { share } from '../validate.js'

const tokens = { type: 'number', minimum: 0 } as const
export const FinishReason = { enum: ['stop', 'tool-calls', 'max-tokens', 'refusal'] } as const
export type FinishReason = Wire<typeof FinishReason>

export const StreamChunk = {
  $id: 'urn:subagent-worker:stream-chunk',
  ...union([
    variant('text-delta', { text: string }),
    variant('tool-call', { id: string, name: string, arguments: string }),
    variant('usage', { inputTokens: tokens, outputTokens: tokens }),
    variant('finish', { reason: FinishReason }),
  ]),
} as const
share(StreamChunk)
export type StreamChunkSchema = typeof StreamChunk
export type StreamChunk = Wire<StreamChunkSchema>
