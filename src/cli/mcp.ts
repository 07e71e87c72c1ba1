/** `subagent-worker mcp`: delegation as an MCP server on stdio, until the client closes stdin. */
import { parseArgs } from 'node:util'
import { createHost, OpenAICompatibleModel, type AgentOptions, type Host, type Model, type ModelRequest, type StreamChunk } from '../index.js'
import { UsageError } from './terminal/failure.js'
import { subagentError } from '../protocol/errors.js'

export const MCP_USAGE = `usage: subagent-worker mcp [--isolation worker|process|inline] [--agent-module URL]
                           [--openai-base-url URL --model NAME]

Serves the subagent tool and the job tools (job_output, job_kill, job_list) to one MCP client
on stdin/stdout. Needs the @modelcontextprotocol/sdk package installed.

  --isolation MODE         where children run: worker (threads, default), process (child
                           processes under Node's permission model) or inline
  --agent-module URL       an agent module with the children's tools and models, as a file URL
                           or absolute path
  --openai-base-url URL    an OpenAI-compatible endpoint for the children's model (the key is
                           read from OPENAI_API_KEY); without it, a scripted demo model answers
  --model NAME             the model to ask at that endpoint (needed with --openai-base-url)
  --help                   this text
`

const OPTIONS = {
  isolation: { type: 'string' },
  'agent-module': { type: 'string' },
  'openai-base-url': { type: 'string' },
  model: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const

const ISOLATIONS = ['worker', 'process', 'inline'] as const
type Isolation = (typeof ISOLATIONS)[number]

export async function runMcp(argv: string[]): Promise<void> {
  const values = parse(argv)
  if (values.help) return void process.stdout.write(MCP_USAGE)
  const isolation = isolationOf(values.isolation)
  const { mcpServer, StdioServerTransport } = await loadSdk()
  const host = createHost({ isolation, ...(values['agent-module'] === undefined ? {} : { agentModule: values['agent-module'] }) })
  const agentOptions = registerModel(host, values)
  const server = mcpServer(host, { provider: 'spawn', agentOptions })
  const closed = new Promise<void>((resolve) => (server.onclose = resolve))
  await server.connect(new StdioServerTransport())
  // The client ending stdin is how stdio MCP says goodbye; the SDK's transport does not watch for it.
  process.stdin.once('end', () => void server.close())
  await closed
  await host.close()
}

function parse(argv: string[]) {
  try {
    return parseArgs({ args: argv, options: OPTIONS, strict: true, allowPositionals: false }).values
  } catch (error) {
    throw new UsageError((error as Error).message)
  }
}

function isolationOf(value: string | undefined): Isolation {
  if (value === undefined) return 'worker'
  if (!(ISOLATIONS as readonly string[]).includes(value)) throw new UsageError(`--isolation must be worker, process or inline, not ${JSON.stringify(value)}`)
  return value as Isolation
}

/** The children's model: the OpenAI-compatible endpoint when given, else the demo model. */
function registerModel(host: Host, values: ReturnType<typeof parse>): AgentOptions {
  const baseUrl = values['openai-base-url']
  if (baseUrl === undefined) {
    if (values.model !== undefined) throw new UsageError('--model names a model at --openai-base-url: give both, or neither for the scripted demo model')
    host.models.register('demo', demoModel)
    return { provider: 'demo' }
  }
  if (values.model === undefined) throw new UsageError('--openai-base-url needs --model NAME (the model to ask there)')
  const apiKey = process.env.OPENAI_API_KEY
  let model: OpenAICompatibleModel
  try {
    model = new OpenAICompatibleModel({ baseUrl, ...(apiKey ? { apiKey } : {}) })
  } catch (error) {
    // The flag's value, refused by the model: the command line's mistake (exit 2), named as the flag.
    throw new UsageError(`--openai-base-url ${JSON.stringify(baseUrl)}: ${(error as Error).message}`)
  }
  host.models.register('openai', model)
  return { provider: 'openai', model: values.model }
}

/** A model with no network and no key: it answers every task by quoting it, so a client can try the server. */
const demoModel: Model = {
  async *stream(request: ModelRequest): AsyncIterable<StreamChunk> {
    yield { type: 'text-delta', text: `scripted demo model (no --openai-base-url given): the task was "${lastUserText(request)}"` }
    yield { type: 'finish', reason: 'stop' }
  },
}

function lastUserText(request: ModelRequest): string {
  for (let i = request.messages.length - 1; i >= 0; i--) {
    const message = request.messages[i]!
    if (message.role === 'user') return message.content.map((block) => (block.type === 'text' ? block.text : '')).join('')
  }
  return ''
}

/** The mcp command is the one that needs the optional peer: say so plainly when it is missing. */
async function loadSdk() {
  try {
    const [{ mcpServer }, { StdioServerTransport }] = await Promise.all([import('../mcp/index.js'), import('@modelcontextprotocol/sdk/server/stdio.js')])
    return { mcpServer, StdioServerTransport }
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_MODULE_NOT_FOUND' && /@modelcontextprotocol\/sdk/.test((error as Error).message)) {
      throw subagentError('ERR_SUBAGENT_PEER_MISSING', 'the mcp command needs the @modelcontextprotocol/sdk package: npm install @modelcontextprotocol/sdk')
    }
    throw error
  }
}
