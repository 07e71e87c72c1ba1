/** `subagent-worker mcp` as a real child process, spoken to by the SDK's Client over stdio. */
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js'
import { execFile, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterEach, expect, it } from 'vitest'
import { modelServer, type ModelServer } from '../support/model-server.js'

const MAIN = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url))
const clients: Client[] = []
const servers: ModelServer[] = []
afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close()))
  await Promise.all(servers.splice(0).map((server) => server.close()))
})

async function cli(): Promise<Client> {
  const client = new Client({ name: 'subagent-worker-test', version: '0.0.0' })
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [MAIN, 'mcp', '--isolation', 'worker'], stderr: 'inherit' }))
  clients.push(client)
  return client
}

it('delegates on worker threads with the scripted demo model', async () => {
  const client = await cli()
  const { tools } = await client.listTools()
  expect(tools.map((tool) => tool.name)).toEqual(['subagent', 'job_output', 'job_kill', 'job_list'])
  const result = await client.callTool({ name: 'subagent', arguments: { description: 'try it', prompt: 'name three rivers' } })
  expect(result.isError).toBeFalsy()
  expect(result.content).toEqual([{ type: 'text', text: 'scripted demo model (no --openai-base-url given): the task was "name three rivers"' }])
})

it('a bad argument is a tool error that names it', async () => {
  const client = await cli()
  expect(await client.callTool({ name: 'subagent', arguments: { description: 'x', prompt: 42 } })).toEqual({
    content: [{ type: 'text', text: expect.stringMatching(/^invalid arguments for "subagent": arguments\/prompt must be string/) }],
    isError: true,
  })
})

/** The SDK's client over a process this test spawned itself, so the test sees how it exits. */
function processTransport(child: ChildProcessWithoutNullStreams): Transport {
  const buffer = new ReadBuffer()
  const transport: Transport = {
    async start() {
      child.stdout.on('data', (chunk: Buffer) => {
        buffer.append(chunk)
        for (let message = buffer.readMessage(); message !== null; message = buffer.readMessage()) transport.onmessage?.(message)
      })
    },
    async send(message: JSONRPCMessage) {
      child.stdin.write(serializeMessage(message))
    },
    async close() {
      child.stdin.end()
      transport.onclose?.()
    },
  }
  return transport
}

it('exits with code 0 when the client closes stdin, stopping a child still waiting for its model', async () => {
  let asked!: () => void
  const modelAsked = new Promise<void>((resolve) => (asked = resolve))
  // An endpoint that takes the request and never answers: only the server's shutdown ends the child.
  const endpoint = await modelServer([() => asked()])
  servers.push(endpoint)
  const child = spawn(process.execPath, [MAIN, 'mcp', '--isolation', 'worker', '--openai-base-url', endpoint.url, '--model', 'm'], { stdio: 'pipe' })
  const exit = once(child, 'exit')
  const client = new Client({ name: 'subagent-worker-test', version: '0.0.0' })
  await client.connect(processTransport(child))
  const started = await client.callTool({ name: 'subagent', arguments: { description: 'long one', prompt: 'take your time', run_in_background: true } })
  expect(started.content).toEqual([{ type: 'text', text: expect.stringMatching(/^started background subagent job /) }])
  await modelAsked
  expect(endpoint.bodies[0]).toMatchObject({ model: 'm' })
  await client.close()
  expect(await exit).toEqual([0, null])
})

it('a bad command line exits 2 saying what to give', async () => {
  const failed = (args: string[]) => promisify(execFile)(process.execPath, [MAIN, 'mcp', ...args]).then(() => undefined, (error: { code: number; stderr: string }) => error)
  expect(await failed(['--isolation', 'thread'])).toMatchObject({ code: 2, stderr: expect.stringContaining('--isolation must be worker, process or inline, not "thread"') })
  expect(await failed(['--openai-base-url', 'http://127.0.0.1:1/v1'])).toMatchObject({ code: 2, stderr: expect.stringContaining('--openai-base-url needs --model NAME') })
  expect(await failed(['--openai-base-url', 'not a url', '--model', 'm'])).toMatchObject({
    code: 2,
    stderr: expect.stringContaining('--openai-base-url "not a url": OpenAICompatibleModel needs a baseUrl starting with http:// or https://'),
  })
})
