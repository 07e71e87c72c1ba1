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
 * host-placed model on a runner: the host records each delta as it streams, and the runner as it
 * receives it, so both copies of the record hold the same chunks at the same seqs). The loop
 * reads their text but does not record it again. A brand on the model (made once a child), not a
 * WeakSet entry, which the collector would have to trace as an ephemeron.
 */
const RECORDED_ON_ARRIVAL = Symbol('recordedOnArrival')

export function recordsOnArrival<M extends Model>(model: M): M {
  return Object.assign(model, { [RECORDED_ON_ARRIVAL]: true as const })
}

export function isRecordedOnArrival(model: Model): boolean {
  return (model as { [RECORDED_ON_ARRIVAL]?: true })[RECORDED_ON_ARRIVAL] === true
}
