/** Content blocks: what messages and tool results are made of. Plain data, safe to clone. */
import { union, variant } from './schema.js'

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

export const contentBlockSchema = union('subagent-worker/content-block', [
  variant('text', { text: { type: 'string' } }),
  variant('tool-call', { id: { type: 'string' }, name: { type: 'string' }, arguments: { type: 'string' } }),
])

export function textOf(blocks: readonly ContentBlock[]): string {
  let text = ''
  for (const block of blocks) if (block.type === 'text') text += block.text
  return text
}
