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

/**
 * Models whose text deltas are recorded as they arrive, by the transport that brings them (a
 * host-placed model on a runner: the host records each delta as it sends it, and the runner as it
 * receives it, so both copies of the record hold the same chunks at the same seqs). The loop
 * reads their text but does not record it again.
 */
const recordedOnArrival = new WeakSet<Model>()

export function recordsOnArrival<M extends Model>(model: M): M {
  recordedOnArrival.add(model)
  return model
}

export function isRecordedOnArrival(model: Model): boolean {
  return recordedOnArrival.has(model)
}
