/** The model seam: one streamed request per loop step. */
import type { ModelMessage, ModelRequestData } from '../../protocol/shapes/model.js'
import type { StreamChunk } from '../../protocol/shapes/stream.js'

export type { ModelMessage }

/**
 * What the model sees of a tool. `parameters` is any JSON Schema object, typed `object` as a
 * caller's schema usually is; the wire's shape (a record) is what a checked frame gives, and is
 * one of these.
 */
export interface ToolSchema {
  name: string
  description: string
  parameters: object
}

export interface ModelRequest extends Omit<ModelRequestData, 'tools'> {
  /** Absent, not empty, when the agent can see no tool. */
  tools?: ToolSchema[]
  /** Aborted with the cancel reason when the agent is cancelled. */
  signal: AbortSignal
}

export interface Model {
  stream(request: ModelRequest): AsyncIterable<StreamChunk>
}

/**
 * A transport's stand-in for a model that runs elsewhere (a host-placed model on a runner). Its
 * text deltas are recorded as they arrive, by the transport that brings them (the host records
 * each delta as it streams, and the runner as it receives it, so both copies of the record hold
 * the same chunks at the same seqs): the loop reads their text but does not record it again. And
 * it stops at its signal by itself (an abort cancels its call, which ends its stream with the
 * abort's reason), so the loop reads it as it is, not through `untilAbort`, which guards against
 * a user's model that ignores the signal. A brand on the model (made once a child), not a WeakSet
 * entry, which the collector would have to trace as an ephemeron.
 */
const STAND_IN = Symbol('standIn')

export function standIn<M extends Model>(model: M): M {
  return Object.assign(model, { [STAND_IN]: true as const })
}

export function isStandIn(model: Model): boolean {
  return (model as { [STAND_IN]?: true })[STAND_IN] === true
}
