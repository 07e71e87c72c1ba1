/** The model seam: one streamed request per loop step. */
import type { ModelMessage, ModelRequestData, ToolSchema } from '../../protocol/shapes/model.js'
import type { StreamChunk } from '../../protocol/shapes/stream.js'

export type { ModelMessage, ToolSchema }

export interface ModelRequest extends ModelRequestData {
  /** Aborted with the cancel reason when the agent is cancelled. */
  signal: AbortSignal
}

export interface Model {
  stream(request: ModelRequest): AsyncIterable<StreamChunk>
}
