/**
 * S9u's model, written the way a user would write one: a plain async generator that awaits a
 * timer between chunks, with none of ScriptedModel's script bookkeeping. It streams S9's shape
 * (read from the child's model id, as the module model does) and is stateless, so one object
 * serves every request: the bench module exports it for the module placement (module.ts) and
 * the S9u scenario registers it on the host for the host placement.
 */
import type { Model, StreamChunk } from '../../index.js'
import { shapeOf } from './stream-script.js'

/** The module model's name (module.ts); the host placement registers it under USER_HOST_MODEL. */
export const USER_STREAM_MODEL = 'bench-user-stream'
export const USER_HOST_MODEL = 'bench-user-stream-host'

const tick = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export const userStreamModel: Model = {
  async *stream(request): AsyncGenerator<StreamChunk> {
    const { chunks, intervalMs } = shapeOf(request.model)
    for (let i = 0; i < chunks; i++) {
      await tick(intervalMs)
      yield { type: 'text-delta', text: `token${i} ` }
    }
    // The finish waits its interval too, as S9's script does, so both stream the same ideal.
    await tick(intervalMs)
    yield { type: 'finish', reason: 'stop' }
  },
}
