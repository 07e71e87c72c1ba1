/** A model that acts on the task it is given, and an SDK client linked in memory to a server. */
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js'
import type { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { fileURLToPath } from 'node:url'
import { textResponse, toolCallResponse, type Model, type ModelMessage, type ModelRequest } from 'subagent-worker'

export const MCP_MODULE = fileURLToPath(new URL('../fixtures/mcp-module.mjs', import.meta.url))
export const SPIN_CHANNEL = 'subagent-worker-mcp-spin'

const textOf = (message: ModelMessage) => message.content.map((block) => (block.type === 'text' ? block.text : '')).join('')

/**
 * The child's task decides what it does: `spin` calls the spinning module tool, `steps` calls the
 * `step` tool three times, `structured <json>` reports that value, `call <tool> <json>` calls a
 * tool once, `hang` waits for the abort; anything else is answered at once.
 */
export const taskModel: Model = {
  async *stream(request: ModelRequest) {
    const task = textOf(request.messages.find((message) => message.role === 'user')!)
    const results = request.messages.filter((message) => message.role === 'tool')
    const step = results.length
    const [verb, ...rest] = task.split(' ')
    const argument = rest.join(' ')
    if (verb === 'spin' && step === 0) return yield* toolCallResponse('c0', 'announce_and_spin', {})
    if (verb === 'steps' && step < 3) return yield* toolCallResponse(`c${step}`, 'step', {})
    if (verb === 'structured' && step === 0) return yield* toolCallResponse('c0', 'structured_output', argument)
    if (verb === 'call' && step === 0) {
      const [tool, ...json] = rest
      return yield* toolCallResponse('c0', tool!, json.join(' '))
    }
    if (verb === 'call') return yield* textResponse(`tool said: ${textOf(results[0]!)}`)
    if (verb === 'hang') {
      await new Promise((_, reject) => request.signal.addEventListener('abort', () => reject(request.signal.reason), { once: true }))
    }
    yield* textResponse(`answer to: ${task}`)
  },
}

export async function connect(server: Server): Promise<Client> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
  const client = new Client({ name: 'subagent-worker-test', version: '0.0.0' })
  await Promise.all([server.connect(serverSide), client.connect(clientSide)])
  return client
}
