/** Stream chunks: what a model emits for one request. They cross threads for host-placed models. */

export type FinishReason = 'stop' | 'tool-calls' | 'max-tokens' | 'refusal'

export type StreamChunk =
  | { type: 'text-delta'; text: string }
  | { type: 'tool-call'; id: string; name: string; arguments: string }
  | { type: 'usage'; inputTokens: number; outputTokens: number }
  | { type: 'finish'; reason: FinishReason }

export const streamChunkSchema = {
  $id: 'subagent-worker/stream-chunk',
  type: 'object',
  discriminator: { propertyName: 'type' },
  required: ['type'],
  oneOf: [
    {
      type: 'object',
      properties: { type: { const: 'text-delta' }, text: { type: 'string' } },
      required: ['type', 'text'],
      additionalProperties: false,
    },
    {
      type: 'object',
      properties: {
        type: { const: 'tool-call' },
        id: { type: 'string' },
        name: { type: 'string' },
        arguments: { type: 'string' },
      },
      required: ['type', 'id', 'name', 'arguments'],
      additionalProperties: false,
    },
    {
      type: 'object',
      properties: {
        type: { const: 'usage' },
        inputTokens: { type: 'number', minimum: 0 },
        outputTokens: { type: 'number', minimum: 0 },
      },
      required: ['type', 'inputTokens', 'outputTokens'],
      additionalProperties: false,
    },
    {
      type: 'object',
      properties: {
        type: { const: 'finish' },
        reason: { enum: ['stop', 'tool-calls', 'max-tokens', 'refusal'] },
      },
      required: ['type', 'reason'],
      additionalProperties: false,
    },
  ],
} as const
