/** Content blocks: what messages and tool results are made of. Plain data, safe to clone. */

export interface TextBlock {
  type: 'text'
  text: string
}

export interface ToolCallBlock {
  type: 'tool-call'
  id: string
  name: string
  /** The model's raw argument text (JSON); kept verbatim because it may be cut off. */
  arguments: string
}

export type ContentBlock = TextBlock | ToolCallBlock

export const contentBlockSchema = {
  $id: 'subagent-worker/content-block',
  type: 'object',
  discriminator: { propertyName: 'type' },
  required: ['type'],
  oneOf: [
    {
      type: 'object',
      properties: { type: { const: 'text' }, text: { type: 'string' } },
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
  ],
} as const

export function textOf(blocks: readonly ContentBlock[]): string {
  let text = ''
  for (const block of blocks) if (block.type === 'text') text += block.text
  return text
}
