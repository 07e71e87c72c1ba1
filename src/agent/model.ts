/** The model seam: one streamed request per loop step. */
import type { ContentBlock } from '../protocol/content.js'
import type { StreamChunk } from '../protocol/stream.js'

/** What the model sees of a tool. */
export interface ToolSchema {
  name: string
  description: string
  parameters: object
}

export type ModelMessage =
  | { role: 'user'; content: ContentBlock[] }
  | { role: 'assistant'; content: ContentBlock[] }
  | { role: 'tool'; callId: string; name: string; isError: boolean; content: ContentBlock[] }

export interface ModelRequest {
  /** The model id from the agent's options (`options.model`), or the provider name. */
  model: string
  system?: string
  messages: ModelMessage[]
  /** Absent, not empty, when the agent can see no tool. */
  tools?: ToolSchema[]
  maxTokens?: number
  /** Aborted with the cancel reason when the agent is cancelled. */
  signal: AbortSignal
}

export interface Model {
  stream(request: ModelRequest): AsyncIterable<StreamChunk>
}
