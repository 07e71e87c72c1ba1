/**
 * mcpTools: a real MCP server of the test's own (the SDK's McpServer, two tools) whose tools the
 * host registers, called by children on every local transport through the host.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { afterEach, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { createHost, type HostOptions, type Model, type ModelRequest } from 'subagent-worker'
import { mcpTools } from 'subagent-worker/mcp'
import { taskModel } from './support.js'

const closing: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close()
})

/** The test's MCP server: `add` sums, `lookup` knows one key and throws for any other. Counts the calls it serves. */
async function testServer() {
  const server = new McpServer({ name: 'test-tools', version: '0.0.0' })
  const served: string[] = []
  server.registerTool('add', { description: 'Adds two numbers.', inputSchema: { a: z.number(), b: z.number() } }, ({ a, b }) => {
    served.push('add')
    return { content: [{ type: 'text', text: String(a + b) }] }
  })
  server.registerTool('lookup', { description: 'Looks a key up.', inputSchema: { key: z.string() } }, ({ key }) => {
    served.push('lookup')
    if (key !== 'known') throw new Error(`no entry for ${key}`)
    return { content: [{ type: 'text', text: 'found' }] }
  })
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
  const client = new Client({ name: 'subagent-worker-host', version: '0.0.0' })
  await Promise.all([server.connect(serverSide), client.connect(clientSide)])
  closing.push(() => client.close(), () => server.close())
  return { client, served }
}

/** A host with the MCP tools registered, and the requests its children's model saw. */
async function hostWith(options: HostOptions) {
  const { client, served } = await testServer()
  const host = createHost(options)
  closing.push(() => host.close())
  for (const tool of await mcpTools(client, { prefix: 'mcp_' })) host.tools.register(tool)
  const requests: ModelRequest[] = []
  const model: Model = { stream: (request) => (requests.push(request), taskModel.stream(request)) }
  host.models.register('task', model)
  const parent = host.createAgent({ options: { provider: 'task' } })
  return { host, parent, requests, served, client }
}

const answerOf = (result: { output: { type: string; text?: string }[] }) => result.output.map((block) => block.text ?? '').join('')
const toolMessage = (request: ModelRequest) => request.messages.find((message) => message.role === 'tool') as { isError: boolean; content: { text: string }[] }

describe('mcpTools', () => {
  it('gives the server\'s tools with their JSON Schemas as parameters, under the prefix', async () => {
    const { host } = await hostWith({ isolation: 'inline' })
    const add = host.tools.get('mcp_add')!
    expect(add.description).toBe('Adds two numbers.')
    expect(add.parameters).toMatchObject({ type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] })
    expect(host.tools.get('mcp_lookup')).toBeDefined()
  })

  for (const isolation of ['inline', 'worker', 'process'] as const) {
    it(`children on ${isolation} call them through the host`, async () => {
      const { host, parent, requests, served } = await hostWith({ isolation })
      const result = await host.spawn.run({ prompt: 'call mcp_add {"a":2,"b":3}', parent })
      expect(result.stopReason).toBe('completed')
      expect(answerOf(result)).toBe('tool said: 5')
      expect(served).toEqual(['add'])
      expect(requests[0]!.tools!.map((tool) => tool.name)).toEqual(expect.arrayContaining(['mcp_add', 'mcp_lookup']))
    })
  }

  it('the tool filter applies to them: a denied tool is not offered, and a call of it is refused without reaching the server', async () => {
    const { host, parent, requests, served } = await hostWith({ isolation: 'worker' })
    const result = await host.spawn.run({ prompt: 'call mcp_lookup {"key":"known"}', parent, toolFilter: { deny: ['mcp_lookup'] } })
    expect(result.stopReason).toBe('completed')
    expect(requests[0]!.tools!.map((tool) => tool.name)).not.toContain('mcp_lookup')
    expect(toolMessage(requests[1]!).isError).toBe(true)
    expect(served).toEqual([])
  })

  it('an error from the server is a tool error the child reads', async () => {
    const { host, parent, requests, served } = await hostWith({ isolation: 'worker' })
    const result = await host.spawn.run({ prompt: 'call mcp_lookup {"key":"other"}', parent })
    expect(result.stopReason).toBe('completed')
    expect(served).toEqual(['lookup'])
    const message = toolMessage(requests[1]!)
    expect(message.isError).toBe(true)
    expect(message.content[0]!.text).toContain('no entry for other')
  })

  it('a call that fails on the connection is a tool error naming the tool', async () => {
    const { host, parent, requests, client } = await hostWith({ isolation: 'inline' })
    await client.close()
    const result = await host.spawn.run({ prompt: 'call mcp_add {"a":1,"b":1}', parent })
    expect(result.stopReason).toBe('completed')
    const message = toolMessage(requests[1]!)
    expect(message.isError).toBe(true)
    expect(message.content[0]!.text).toMatch(/^MCP tool "add" failed: .*Not connected/)
  })
})
