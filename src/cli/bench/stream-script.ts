/**
 * S9's stream, shared by the host's ScriptedModel and the module model. Its shape is the plan's
 * (`plan.stream`: the quick plan streams less). A module model takes no parameters, so the shape
 * reaches it in the child's model id, which every request carries: both placements stream alike.
 */
import type { ScriptEntry, StreamChunk } from '../../index.js'

/** The module model's name (see module.ts). */
export const STREAM_MODEL = 'bench-stream'

/** One child's stream: `chunks` text chunks, one every `intervalMs`, then the finish. */
export interface StreamShape {
  chunks: number
  intervalMs: number
}

/**
 * A child's ideal wall time, and a batch's, since every child streams at the same time. The
 * finish chunk waits its interval too, so even a perfect run takes one interval more.
 */
export const idealMs = (shape: StreamShape): number => shape.chunks * shape.intervalMs

/** The model id that carries `shape` to the module model. */
export const streamModelId = ({ chunks, intervalMs }: StreamShape): string => `stream-${chunks}x${intervalMs}ms`

/** The shape a child's model id names; throws on any other id, since a bench of the wrong stream measures nothing. */
export function shapeOf(modelId: string): StreamShape {
  const match = /^stream-(\d+)x(\d+)ms$/.exec(modelId)
  if (!match) throw new Error(`the bench's stream model needs a model id like "stream-100x20ms" (streamModelId), not ${JSON.stringify(modelId)}`)
  return { chunks: Number(match[1]), intervalMs: Number(match[2]) }
}

/** One model request's script entry: the text chunks one every `intervalMs`, then the finish. */
export function streamEntry({ chunks, intervalMs }: StreamShape): ScriptEntry {
  const text = Array.from({ length: chunks }, (_, i): StreamChunk => ({ type: 'text-delta', text: `token${i} ` }))
  return { intervalMs, chunks: [...text, { type: 'finish', reason: 'stop' }] }
}
