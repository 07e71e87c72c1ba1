/**
 * mcpTools with the schemas servers really send: a pydantic-shaped one (`$defs`, `$ref`, a
 * one-entry `allOf`), served by the SDK's low-level Server as a Python server would, and a zod
 * discriminated union (`oneOf`) from the SDK's McpServer. Each becomes a host tool in the subset,
 * checked on the host, and the server still gets exactly the arguments the child sent.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import { afterEach, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { createHost, type Model, type ModelRequest } from 'subagent-worker'
import { mcpTools } from 'subagent-worker/mcp'
import { connect, taskModel } from './support.js'

const closing: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close()
})

/** What pydantic v2 writes for `def move(start: Point, end: Point | None = None, unit: Unit)`, v1's `allOf` wrapper on `unit`. */
const PYDANTIC_SCHEMA = {
  type: 'object',
  title: 'moveArguments',
  $defs: {
    Point: { type: 'object', title: 'Point', properties: { x: { type: 'number', title: 'X' }, y: { type: 'number', title: 'Y' } }, required: ['x', 'y'] },
    Unit: { type: 'string', enum: ['m', 'km'], title: 'Unit' },
  },
  properties: {
    start: { $ref: '#/$defs/Point', description: 'Where to start.' },
    end: { anyOf: [{ $ref: '#/$defs/Point' }, { type: 'null' }], default: null },
    unit: { allOf: [{ $ref: '#/$defs/Unit' }], description: 'The unit.' },
  },
  required: ['start', 'unit'],
}

/** A low-level server that lists one tool with `inputSchema` and records the arguments of every call. */
async function rawServer(inputSchema: Record<string, unknown>) {
  const server = new Server({ name: 'raw', version: '0.0.0' }, { capabilities: { tools: {} } })
  const calls: unknown[] = []
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [{ name: 'move', description: 'Moves.', inputSchema: inputSchema as { type: 'object' } }] }))
  server.setRequestHandler(CallToolRequestSchema, (request) => {
    calls.push(request.params.arguments)
    return { content: [{ type: 'text', text: 'moved' }] }
  })
  const client = await connect(server)
  closing.push(() => client.close(), () => server.close())
  return { client, calls }
}

async function hostWith(tools: Awaited<ReturnType<typeof mcpTools>>) {
  const host = createHost({ isolation: 'worker' })
  closing.push(() => host.close())
  for (const tool of tools) host.tools.register(tool)
  const requests: ModelRequest[] = []
  const model: Model = { stream: (request) => (requests.push(request), taskModel.stream(request)) }
  host.models.register('task', model)
  return { host, requests, parent: host.createAgent({ options: { provider: 'task' } }) }
}

const toolText = (request: ModelRequest) => {
  const message = request.messages.find((m) => m.role === 'tool') as { isError: boolean; content: { text: string }[] }
  return { isError: message.isError, text: message.content[0]!.text }
}

describe('mcpTools with generated schemas', () => {
  it('inlines a pydantic schema\'s $defs and $ref and merges a one-entry allOf, keeping each annotation', async () => {
    const { client } = await rawServer(PYDANTIC_SCHEMA)
    const [move] = await mcpTools(client)
    const point = PYDANTIC_SCHEMA.$defs.Point
    expect(move!.parameters).toEqual({
      type: 'object',
      title: 'moveArguments',
      properties: {
        start: { ...point, description: 'Where to start.' },
        end: { anyOf: [point, { type: 'null' }], default: null },
        unit: { type: 'string', enum: ['m', 'km'], title: 'Unit', description: 'The unit.' },
      },
      required: ['start', 'unit'],
    })
  })

  it('a child calls such a tool: valid arguments reach the server unchanged, invalid ones are refused on the host', async () => {
    const { client, calls } = await rawServer(PYDANTIC_SCHEMA)
    const { host, parent, requests } = await hostWith(await mcpTools(client))
    const args = { start: { x: 1, y: 2 }, end: null, unit: 'km' }
    const ok = await host.spawn.run({ prompt: `call move ${JSON.stringify(args)}`, parent })
    expect(ok.stopReason).toBe('completed')
    expect(calls).toEqual([args])
    expect(toolText(requests[1]!)).toEqual({ isError: false, text: 'moved' })

    const bad = await host.spawn.run({ prompt: 'call move {"start":{"x":1},"unit":"mi"}', parent })
    expect(bad.stopReason).toBe('completed')
    expect(calls).toHaveLength(1)
    expect(toolText(requests[3]!)).toMatchObject({ isError: true, text: expect.stringMatching(/missing property "y"|must be equal to one of/) })
  })

  it('takes a zod discriminated union (oneOf) as anyOf: each branch is offered, and arguments matching none are refused before the server', async () => {
    const server = new McpServer({ name: 'zod-tools', version: '0.0.0' })
    const calls: unknown[] = []
    const shape = { shape: z.discriminatedUnion('kind', [z.object({ kind: z.literal('circle'), r: z.number() }), z.object({ kind: z.literal('square'), side: z.number() })]) }
    server.registerTool('area', { description: 'Area of a shape.', inputSchema: shape }, (args) => {
      calls.push(args)
      return { content: [{ type: 'text', text: 'computed' }] }
    })
    const client = await connect(server.server)
    closing.push(() => client.close(), () => server.close())
    const tools = await mcpTools(client, { prefix: 'geo_' })
    const area = tools[0]!.parameters as { properties: { shape: Record<string, unknown> } }
    expect(area.properties.shape).not.toHaveProperty('oneOf')
    expect(area.properties.shape['anyOf']).toHaveLength(2)

    const { host, parent, requests } = await hostWith(tools)
    const ok = await host.spawn.run({ prompt: 'call geo_area {"shape":{"kind":"circle","r":2}}', parent })
    expect(ok.stopReason).toBe('completed')
    expect(calls).toEqual([{ shape: { kind: 'circle', r: 2 } }])
    const bad = await host.spawn.run({ prompt: 'call geo_area {"shape":{"kind":"triangle"}}', parent })
    expect(bad.stopReason).toBe('completed')
    expect(toolText(requests[3]!).isError).toBe(true)
    expect(calls).toHaveLength(1)
  })

  it("takes pydantic's discriminated union (oneOf of $refs with OpenAPI's discriminator beside it), dropping the discriminator", async () => {
    const cat = { type: 'object', properties: { pet_type: { const: 'cat', type: 'string' }, meows: { type: 'integer' } }, required: ['pet_type', 'meows'] }
    const dog = { type: 'object', properties: { pet_type: { const: 'dog', type: 'string' }, barks: { type: 'number' } }, required: ['pet_type', 'barks'] }
    const { client, calls } = await rawServer({
      type: 'object',
      $defs: { Cat: cat, Dog: dog },
      properties: { pet: { discriminator: { mapping: { cat: '#/$defs/Cat', dog: '#/$defs/Dog' }, propertyName: 'pet_type' }, oneOf: [{ $ref: '#/$defs/Cat' }, { $ref: '#/$defs/Dog' }], title: 'Pet' } },
      required: ['pet'],
    })
    const tools = await mcpTools(client)
    expect(tools[0]!.parameters).toEqual({ type: 'object', properties: { pet: { anyOf: [cat, dog], title: 'Pet' } }, required: ['pet'] })
    const { host, parent } = await hostWith(tools)
    expect(await host.spawn.run({ prompt: 'call move {"pet":{"pet_type":"dog","barks":2}}', parent })).toMatchObject({ stopReason: 'completed' })
    expect(calls).toEqual([{ pet: { pet_type: 'dog', barks: 2 } }])
  })

  it('an MCP name a model API would refuse (files.read, a/b) is the host tool\'s with "_", called by its own name; two that meet there are refused, naming both', async () => {
    const server = new Server({ name: 'names', version: '0.0.0' }, { capabilities: { tools: {} } })
    const called: string[] = []
    let listed = ['files.read', 'a/b']
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: listed.map((name) => ({ name, description: name, inputSchema: { type: 'object' as const } })) }))
    server.setRequestHandler(CallToolRequestSchema, (request) => (called.push(request.params.name), { content: [{ type: 'text', text: 'read' }] }))
    const client = await connect(server)
    closing.push(() => client.close(), () => server.close())
    const tools = await mcpTools(client, { prefix: 'fs.' })
    expect(tools.map((tool) => tool.name)).toEqual(['fs_files_read', 'fs_a_b'])
    const { host, parent } = await hostWith(tools)
    expect(await host.spawn.run({ prompt: 'call fs_files_read {}', parent })).toMatchObject({ stopReason: 'completed' })
    expect(called).toEqual(['files.read'])
    listed = ['files.read', 'files_read']
    await expect(mcpTools(client)).rejects.toMatchObject({
      code: 'ERR_SUBAGENT_DEFINITION',
      message: 'MCP tools "files.read" and "files_read" would both be the host tool "files_read": leave one of them out by filtering what the client\'s listTools returns',
    })
  })

  it('refuses a recursive schema, a $ref out of the document and one still outside the subset, naming the tool', async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ type: 'object', $defs: { Node: { type: 'object', properties: { next: { $ref: '#/$defs/Node' } } } }, properties: { head: { $ref: '#/$defs/Node' } } }, /recursive \(#\/\$defs\/Node refers to itself\)/],
      [{ type: 'object', properties: { a: { $ref: 'https://example.com/a.json' } } }, /\$ref "https:\/\/example.com\/a.json" that is not a schema in the same document/],
      [{ type: 'object', properties: { a: { not: { type: 'string' } } } }, /unsupported keyword "not"/],
    ]
    for (const [schema, message] of cases) {
      const { client } = await rawServer(schema)
      await expect(mcpTools(client)).rejects.toMatchObject({ code: 'ERR_SUBAGENT_DEFINITION', message: expect.stringMatching(/^MCP tool "move" cannot be a host tool as "move": /) })
      await expect(mcpTools(client)).rejects.toThrow(message)
    }
  })

  it('bounds what inlining can multiply: a schema that doubles at each level is refused, not expanded', async () => {
    const $defs: Record<string, unknown> = { L0: { type: 'string' } }
    for (let level = 1; level <= 20; level++) $defs[`L${level}`] = { type: 'object', properties: { a: { $ref: `#/$defs/L${level - 1}` }, b: { $ref: `#/$defs/L${level - 1}` } } }
    const { client } = await rawServer({ type: 'object', $defs, properties: { top: { $ref: '#/$defs/L20' } } })
    await expect(mcpTools(client)).rejects.toThrow(/too large once its references are inlined/)
  })
})
