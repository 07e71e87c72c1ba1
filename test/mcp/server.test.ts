/** mcpServer over the SDK's in-memory transport, with the SDK's own Client: no mock on either side. */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js'
import type { Progress } from '@modelcontextprotocol/sdk/types.js'
import { afterEach, describe, expect, it } from 'vitest'
import { createHost, type Host, type SubagentEndEvent } from 'subagent-worker'
import { mcpServer, type McpServerConfig } from 'subagent-worker/mcp'
import { connect, MCP_MODULE, SPIN_CHANNEL, taskModel } from './support.js'

const GRACE_MS = 300
const CITY = { type: 'object', properties: { city: { type: 'string' }, population: { type: 'integer' } }, required: ['city', 'population'], additionalProperties: false }

const open: { host: Host; client: Client }[] = []
afterEach(async () => {
  await Promise.all(open.splice(0).map(async ({ host, client }) => {
    await client.close()
    await host.close()
  }))
})

async function serve(config: Partial<McpServerConfig> = {}) {
  const host = createHost({ isolation: 'worker', agentModule: MCP_MODULE, abortGraceMs: GRACE_MS })
  host.models.register('task', taskModel)
  const server = mcpServer(host, { provider: 'spawn', agentOptions: { provider: 'task' }, ...config })
  const client = await connect(server)
  open.push({ host, client })
  return { host, client, server }
}

const textOf = (result: Awaited<ReturnType<Client['callTool']>>) => (result.content as { type: string; text: string }[]).map((block) => block.text).join('')

describe('mcpServer', () => {
  it('lists the subagent tool and the job tools with their JSON Schemas', async () => {
    const { client } = await serve()
    const { tools } = await client.listTools()
    expect(tools.map((tool) => tool.name)).toEqual(['subagent', 'job_output', 'job_kill', 'job_list'])
    const subagent = tools[0]!
    expect(subagent.inputSchema).toMatchObject({ type: 'object', required: ['description', 'prompt'] })
    expect(Object.keys(subagent.inputSchema.properties!)).toEqual(['description', 'prompt', 'run_in_background'])
    expect(subagent.outputSchema).toBeUndefined()
  })

  it('a call is one delegation on the worker transport, returning the child\'s final text', async () => {
    const { host, client } = await serve()
    const ends: SubagentEndEvent[] = []
    host.on('subagent/end', (end) => void ends.push(end))
    const result = await client.callTool({ name: 'subagent', arguments: { description: 'say hi', prompt: 'hello there' } })
    expect(result.isError).toBeFalsy()
    expect(textOf(result)).toBe('answer to: hello there')
    expect(ends).toMatchObject([{ provider: 'spawn', label: 'say hi', stopReason: 'completed', local: false }])
  })

  it('with outputSchema the tool lists it and returns the child\'s value as structuredContent, and as JSON text for a client that reads only content', async () => {
    const { client } = await serve({ outputSchema: CITY })
    const { tools } = await client.listTools()
    expect(tools[0]!.outputSchema).toEqual(CITY)
    expect(Object.keys(tools[0]!.inputSchema.properties!)).toEqual(['description', 'prompt'])
    const result = await client.callTool({ name: 'subagent', arguments: { description: 'a city', prompt: 'structured {"city":"Paris","population":2100000}' } })
    expect(result.isError).toBeFalsy()
    expect(result.structuredContent).toEqual({ city: 'Paris', population: 2100000 })
    expect(result.content).toEqual([{ type: 'text', text: '{"city":"Paris","population":2100000}' }])
  })

  it('a background call returns a job id, and job_output collects the child\'s answer', async () => {
    const { client } = await serve()
    const started = await client.callTool({ name: 'subagent', arguments: { description: 'in back', prompt: 'later please', run_in_background: true } })
    const jobId = /^started background subagent job (\S+)$/.exec(textOf(started))?.[1]
    expect(jobId).toBeDefined()
    const output = await client.callTool({ name: 'job_output', arguments: { job_id: jobId, wait: true } })
    expect(textOf(output)).toBe(`job ${jobId} completed:\nanswer to: later please`)
    const list = await client.callTool({ name: 'job_list', arguments: {} })
    expect(textOf(list)).toBe(`${jobId}  completed  in back`)
  })

  it('closing the connection ends its background jobs, and the user\'s onclose still runs', async () => {
    const { host, client, server } = await serve()
    let userOnclose = false
    server.onclose = () => void (userOnclose = true)
    const ended = new Promise<SubagentEndEvent>((resolve) => host.on('subagent/end', resolve))
    const started = await client.callTool({ name: 'subagent', arguments: { description: 'hang', prompt: 'hang', run_in_background: true } })
    const jobId = textOf(started).split(' ').at(-1)!
    await client.close()
    expect((await ended).stopReason).toBe('aborted')
    expect(await host.jobs.wait(jobId)).toMatchObject({ status: 'killed' })
    expect(userOnclose).toBe(true)
  })

  it("a second connect the SDK refuses leaves the first connection's jobs alone when its own transport closes", async () => {
    const { host, client, server } = await serve()
    const started = await client.callTool({ name: 'subagent', arguments: { description: 'hang', prompt: 'hang', run_in_background: true } })
    const jobId = textOf(started).split(' ').at(-1)!
    const [, refused] = InMemoryTransport.createLinkedPair()
    await expect(server.connect(refused)).rejects.toThrow(/already connected/i)
    await refused.close()
    // The first connection still serves, and its job still runs.
    expect(host.jobs.get(jobId)).toMatchObject({ status: 'running' })
    expect(textOf(await client.callTool({ name: 'job_list', arguments: {} }))).toBe(`${jobId}  running  hang`)
  })

  it('a child that fails is an error result with the contract\'s text', async () => {
    const { client } = await serve({ agentOptions: { provider: 'no-such-model' } })
    const result = await client.callTool({ name: 'subagent', arguments: { description: 'fail', prompt: 'x' } })
    expect(result.isError).toBe(true)
    expect(textOf(result)).toMatch(/^subagent run failed\nDiagnostic: .*no-such-model/)
  })

  it('the client cancelling the request ends a spinning child aborted within abortGraceMs plus a margin', async () => {
    const { host, client } = await serve()
    const spinning = new Promise<void>((resolve) => {
      const channel = new BroadcastChannel(SPIN_CHANNEL)
      channel.onmessage = () => {
        channel.close()
        resolve()
      }
    })
    const ended = new Promise<SubagentEndEvent>((resolve) => host.on('subagent/end', resolve))
    const cancel = new AbortController()
    const call = client.callTool({ name: 'subagent', arguments: { description: 'spin', prompt: 'spin' } }, undefined, { signal: cancel.signal })
    await spinning
    const cancelledAt = Date.now()
    cancel.abort(new Error('the user stopped it'))
    await expect(call).rejects.toThrow('the user stopped it')
    const end = await ended
    expect(end.stopReason).toBe('aborted')
    expect(end.diagnostic).toContain(`did not stop within abortGraceMs (${GRACE_MS} ms)`)
    // The grace was given in full first; beyond a runaway bound, how late the stop lands is the machine's load.
    expect(Date.now() - cancelledAt).toBeGreaterThanOrEqual(GRACE_MS - 2)
    expect(Date.now() - cancelledAt).toBeLessThan(GRACE_MS + 10_000)
  })

  it('sends the child\'s progress when the client asks for it', async () => {
    const { client } = await serve()
    const reports: Progress[] = []
    const result = await client.callTool({ name: 'subagent', arguments: { description: 'steps', prompt: 'steps' } }, undefined, { onprogress: (progress) => void reports.push(progress) })
    expect(textOf(result)).toBe('answer to: steps')
    expect(reports.length).toBeGreaterThan(0)
    const counts = reports.map((report) => report.progress)
    expect(counts).toEqual([...counts].sort((a, b) => a - b))
    expect(new Set(counts).size).toBe(counts.length)
    for (const report of reports) expect(report.message).toMatch(/^(session|turn|user|assistant|tool|subagent)\//)
    // The last report is the child's end: a turn of three tool steps and an answer.
    expect(reports.at(-1)!.message).toBe('turn/end')
  })

  it('an argument that does not fit the schema is a tool error naming it, for the model to correct (SEP-1303); an unknown tool an MCP error', async () => {
    const { client } = await serve()
    expect(await client.callTool({ name: 'subagent', arguments: { description: 'no prompt' } })).toEqual({
      content: [{ type: 'text', text: expect.stringMatching(/^invalid arguments for "subagent": .*prompt/) }],
      isError: true,
    })
    expect(await client.callTool({ name: 'subagent', arguments: { description: 'd', prompt: 'p', surprise: 1 } })).toEqual({
      content: [{ type: 'text', text: 'invalid arguments for "subagent": arguments must NOT have the unknown property "surprise"' }],
      isError: true,
    })
    await expect(client.callTool({ name: 'nope', arguments: {} })).rejects.toThrow(/unknown tool "nope": the tools are subagent, job_output, job_kill, job_list/)
  })

  it('refuses a config without the children\'s provider, one with continuable children, and an output schema that is not an object', () => {
    const host = createHost({ isolation: 'inline' })
    open.push({ host, client: { close: async () => {} } as Client })
    expect(() => mcpServer(host, { provider: 'spawn' })).toThrow(/needs agentOptions.provider/)
    // Refused when it is made, not at every call: an MCP client cannot message a continuable child.
    expect(() => mcpServer(host, { provider: 'spawn', agentOptions: { provider: 'x' }, backgroundMode: 'continuable' })).toThrow(/mcpServer runs one-shot children/)
    expect(() => mcpServer(host, { provider: 'spawn', agentOptions: { provider: 'x' }, outputSchema: { type: 'string' } })).toThrow(/mcpServer outputSchema must be a JSON Schema object with "type": "object"/)
  })
})
