/**
 * S9's stream, shared by the host's ScriptedModel and the module model. It is fixed here, not in
 * the plan, because a module model takes no parameters: both placements must stream alike.
 */
import type { ScriptEntry, StreamChunk } from '../../index.js'

/** The module model's name (see module.ts). */
export const STREAM_MODEL = 'bench-stream'

export const STREAM_CHUNKS = 100
export const STREAM_INTERVAL_MS = 20

/**
 * A child's ideal wall time, and a batch's, since every child streams at the same time. The
 * finish chunk waits its interval too, so even a perfect run takes one interval more.
 */
export const STREAM_IDEAL_MS = STREAM_CHUNKS * STREAM_INTERVAL_MS

const chunks: StreamChunk[] = [...Array.from({ length: STREAM_CHUNKS }, (_, i): StreamChunk => ({ type: 'text-delta', text: `token${i} ` })), { type: 'finish', reason: 'stop' }]

/** One model request's script entry: the text chunks one every STREAM_INTERVAL_MS, then the finish. */
export function streamEntry(): ScriptEntry {
  return { intervalMs: STREAM_INTERVAL_MS, chunks }
}
