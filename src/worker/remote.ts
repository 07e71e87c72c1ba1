/** Stand-ins for host-placed models and tools: each call goes to the host over the RPC. */
import type { Model, ModelRequest } from '../agent/model.js'
import { RenderedValue, ToolError, type ToolDefinition } from '../agent/tools.js'
import type { RemoteToolDescriptor } from '../protocol/lifecycle.js'
import type { RpcClient } from '../protocol/rpc.js'
import type { StreamChunk } from '../protocol/stream.js'

export function remoteModel(rpc: RpcClient, name: string): Model {
  return {
    async *stream(request: ModelRequest): AsyncGenerator<StreamChunk> {
      const { signal, ...data } = request
      const queue: StreamChunk[] = []
      let wake: (() => void) | undefined
      let done = false
      let failure: { error: unknown } | undefined
      rpc.call('model', name, data, { signal, onChunk: (chunk) => (queue.push(chunk), wake?.()) }).then(
        () => ((done = true), wake?.()),
        (error: unknown) => ((failure = { error }), (done = true), wake?.()),
      )
      for (;;) {
        const chunk = queue.shift()
        if (chunk) {
          yield chunk
        } else if (done) {
          if (failure) throw failure.error
          return
        } else {
          await new Promise<void>((resolve) => (wake = resolve))
          wake = undefined
        }
      }
    },
  }
}

/** What the host answers for a tool call: the value, its rendered text, and whether it concluded the turn. */
export interface RemoteToolReply {
  value?: unknown
  text: string
  concluded: boolean
}

export function remoteTool(rpc: RpcClient, descriptor: RemoteToolDescriptor): ToolDefinition {
  return {
    ...descriptor,
    async execute(args, exec) {
      let reply: RemoteToolReply
      try {
        reply = (await rpc.call('tool', descriptor.name, { args, callId: exec.callId }, { signal: exec.signal })) as RemoteToolReply
      } catch (error) {
        // Keep a deliberate tool error deliberate across the boundary, exact text and code.
        const { name, message, code } = error as { name?: string; message?: string; code?: string }
        if (name === 'ToolError') throw new ToolError(message ?? '', code === 'DENIED' ? 'DENIED' : 'FAILED')
        throw error
      }
      if (typeof reply?.text !== 'string') throw new Error(`host tool "${descriptor.name}" sent a malformed reply`)
      if (reply.concluded) exec.concludeTurn()
      return new RenderedValue(reply.value, reply.text)
    },
  }
}
