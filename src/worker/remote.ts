/** Stand-ins for host-placed models and tools: each call goes to the host over the typed RPC. */
import { recordsOnArrival, type Model, type ModelRequest } from '../agent/models/model.js'
import { RenderedValue } from '../agent/tools/tool-call.js'
import { ToolError, type ToolDefinition } from '../agent/tools/tools.js'
import type { RemoteToolDescriptor } from '../protocol/shapes/child.js'
import type { RpcClient } from '../protocol/rpc.js'
import type { StreamChunk } from '../protocol/shapes/stream.js'
import { isToolErrorCode } from '../protocol/validators.js'
import type { ToolTable } from './tool-table.js'

/**
 * `record` records a text delta in the child's session as it arrives: the host recorded it as the
 * model streamed it (host-calls.ts), so it does not cross back, and the two records keep the same
 * seqs, an aborted stream's deltas that the loop never read included. The host holds a call's
 * chunks until its result (RpcServer), so they mostly come together; the loop reads a delta only
 * to build its step's message, so deltas do not wake it: they wait, joined, until another chunk
 * comes or the call ends.
 */
export function remoteModel(rpc: RpcClient, provider: string, table: ToolTable, record: (text: string) => void): Model {
  return recordsOnArrival({
    async *stream(request: ModelRequest): AsyncGenerator<StreamChunk> {
      // The host serves the child's model with what it has itself (host-calls.ts): the conversation
      // from its copy of the session, the system prompt it composed, the model id and cap of the
      // spec. Only the tools the child sees are the runner's to say.
      const { signal, tools } = request
      const data = tools ? { provider, tools: table.refer(tools) } : { provider }
      /** What came and was not read yet, in order: other chunks, and runs of text deltas. */
      const queue: Array<StreamChunk | string[]> = []
      let wake: (() => void) | undefined
      let done = false
      let failure: { error: unknown } | undefined
      const onChunk = (chunk: StreamChunk) => {
        if (chunk.type !== 'text-delta') {
          queue.push(chunk)
          return wake?.()
        }
        if (chunk.text === '') return
        record(chunk.text)
        const last = queue.at(-1)
        if (Array.isArray(last)) last.push(chunk.text)
        else queue.push([chunk.text])
      }
      const call = rpc.call('model', data, { signal, onChunk })
      call.then(
        () => ((done = true), wake?.()),
        (error: unknown) => ((failure = { error }), (done = true), wake?.()),
      )
      for (;;) {
        const item = queue.shift()
        if (Array.isArray(item)) {
          yield { type: 'text-delta', text: item.join('') }
        } else if (item) {
          yield item
        } else if (done) {
          if (failure) throw failure.error
          return
        } else {
          await new Promise<void>((resolve) => (wake = resolve))
          wake = undefined
        }
      }
    },
  })
}

export function remoteTool(rpc: RpcClient, descriptor: RemoteToolDescriptor): ToolDefinition {
  return {
    ...descriptor,
    async execute(args, exec) {
      try {
        const reply = await rpc.call('tool', { name: descriptor.name, callId: exec.callId, args }, { signal: exec.signal })
        if (reply.concluded) exec.concludeTurn()
        return new RenderedValue(reply.value, reply.text)
      } catch (error) {
        // A deliberate tool error (the tool's own, or the host's refusal) stays deliberate: exact text and code.
        const { name, message, code } = error as { name?: string; message?: string; code?: unknown }
        if (name === 'ToolError') throw new ToolError(message ?? '', isToolErrorCode(code) ? code : 'FAILED')
        throw error
      }
    },
  }
}
