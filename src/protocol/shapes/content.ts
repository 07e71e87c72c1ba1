/** Content blocks: what messages and tool results are made of. Plain data, safe to clone. */
import { ref, string, union, variant, type Wire } from '../schema.js'
import { share } from '../validate.js'

export const ContentBlock = {
  $id: 'urn:subagent-worker:content-block',
  ...union([
    variant('text', { text: string }),
    /** A tool call as the model made it; `arguments` is its raw JSON text, kept verbatim because it may be cut off. */
    variant('tool-call', { id: string, name: string, arguments: string }),
  ]),
} as const
share(ContentBlock)
export type ContentBlockSchema = typeof ContentBlock
export type ContentBlock = Wire<ContentBlockSchema>
export type TextBlock = Extract<ContentBlock, { type: 'text' }>
export type ToolCallBlock = Extract<ContentBlock, { type: 'tool-call' }>

export const contentBlocks = { type: 'array', items: ref(ContentBlock.$id) } as const

export function textOf(blocks: readonly ContentBlock[]): string {
  let text = ''
  for (const block of blocks) if (block.type === 'text') text += block.text
  return text
}
