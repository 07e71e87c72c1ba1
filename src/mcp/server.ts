/**
 * `mcpServer(host, config)`: the `subagent` tool and the job tools as an MCP server, so any MCP
 * client delegates to children it can stop for certain, contain and cap. The children's parent
 * is a top-level agent of the host, created at a connection's first call and disposed (with
 * its background jobs) when that connection closes.
 */
import type { ValidateFunction } from 'ajv'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
  type ServerNotification,
  type ServerRequest,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js'
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import {
  createJobTools,
  createSubagentTool,
  toJsonSchema,
  ToolError,
  type Agent,
  type Host,
  type JsonSchema,
  type SchemaLike,
  type SubagentResult,
  type SubagentRun,
  type SubagentToolConfig,
  type ToolDefinition,
  type ToolExecution,
} from '../index.js'
// The library's one argument validator, so arguments are checked as a library agent checks them.
import { argumentErrorsText, argumentValidator } from '../agent/tools/schema.js'
import { delegationCall, providerOf } from './delegation.js'
import { watchProgress } from './progress.js'
import { subagentError } from '../protocol/errors.js'

export interface McpServerConfig extends SubagentToolConfig {
  /**
   * The child must report a result matching this object-rooted schema (JSON Schema, zod 4 or AI
   * SDK schema): the tool lists it as its `outputSchema` and returns the value as
   * `structuredContent`. Foreground only.
   */
  outputSchema?: SchemaLike
  /** How the server introduces itself to clients; default `{ name: 'subagent-worker', version: '0.1.0' }`. */
  serverInfo?: { name: string; version: string }
}

type McpHost = Pick<Host, 'spawn' | 'fork' | 'jobs' | 'agents' | 'createAgent'>
type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>

/** A tool as served: its definition, its argument check, and how one call runs. */
interface Served {
  definition: ToolDefinition
  listing: Tool
  check: ValidateFunction
  call(args: Record<string, unknown>, exec: ToolExecution, extra: Extra): Promise<CallToolResult>
}

export function mcpServer(host: McpHost, config: McpServerConfig): Server {
  if (typeof config !== 'object' || config === null) throw subagentError('ERR_SUBAGENT_ARGUMENT', 'mcpServer needs a config: a subagent tool config (provider, agentOptions with the children\'s provider, ...), plus outputSchema?')
  const { outputSchema, serverInfo, ...toolConfig } = config
  if (toolConfig.agentOptions?.provider === undefined) {
    throw subagentError('ERR_SUBAGENT_ARGUMENT', "mcpServer needs agentOptions.provider (the registered model its children talk to): the connection's parent agent has no model for them to inherit")
  }
  // A continuable child takes more work by send_message and reports to its parent's session: an
  // MCP client has neither, so it could never read what the child does after its first answer.
  if (toolConfig.backgroundMode === 'continuable') {
    throw subagentError('ERR_SUBAGENT_ARGUMENT', "mcpServer runs one-shot children: an MCP client cannot message a continuable child or read its notices; leave backgroundMode unset or 'one-shot'")
  }
  const schema = outputSchema === undefined ? undefined : toJsonSchema(outputSchema, { what: 'mcpServer outputSchema' })
  const subagentConfig: SubagentToolConfig = schema === undefined ? toolConfig : structuredConfig(host, toolConfig)
  const tools = new Map<string, Served>()
  for (const served of [delegationTool(host, subagentConfig, schema), ...createJobTools(host).map(plainTool)]) tools.set(served.definition.name, served)

  const parent = connectionParent(host, config)
  const server = new DelegationServer(serverInfo ?? { name: 'subagent-worker', version: '0.1.0' }, () => {
    parent.release().catch((error: unknown) => server.onerror?.(error instanceof Error ? error : new Error(String(error))))
  })
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [...tools.values()].map((t) => t.listing) }))
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const served = tools.get(request.params.name)
    if (!served) throw new McpError(ErrorCode.InvalidParams, `unknown tool "${request.params.name}": the tools are ${[...tools.keys()].join(', ')}`)
    const args = request.params.arguments ?? {}
    // A tool execution error, not a protocol one (MCP spec 2025-11-25, SEP-1303): the calling model reads it and can correct its call.
    if (!served.check(args)) return { content: [{ type: 'text', text: `invalid arguments for "${served.definition.name}": ${argumentErrorsText(served.check)}` }], isError: true }
    const exec: ToolExecution = { agent: parent.get(), callId: String(extra.requestId), signal: extra.signal, concludeTurn: () => {} }
    return served.call(args, exec, extra)
  })
  return server
}

/**
 * The SDK's server, which also tells `closed` when a connection's transport closes, whatever
 * the user sets as `onclose`: that ends the connection's background jobs and parent agent.
 */
class DelegationServer extends Server {
  readonly #closed: () => void

  constructor(info: { name: string; version: string }, closed: () => void) {
    super(info, { capabilities: { tools: {} } })
    this.#closed = closed
  }

  override async connect(transport: Transport): Promise<void> {
    const theirs = transport.onclose
    transport.onclose = () => {
      theirs?.()
      // After the SDK has aborted the connection's calls (it does so once this returns).
      queueMicrotask(this.#closed)
    }
    try {
      await super.connect(transport)
    } catch (error) {
      // Refused (already connected, say): that transport's close is not this server's connection's.
      transport.onclose = theirs
      throw error
    }
  }
}

function structuredConfig(host: McpHost, config: SubagentToolConfig): SubagentToolConfig {
  if (config.enableRunInBackground === true) throw subagentError('ERR_SUBAGENT_ARGUMENT', 'mcpServer with outputSchema runs in the foreground only: leave enableRunInBackground unset or false')
  const provider = providerOf(host, config)
  if (!provider.capabilities.outputSchema) throw subagentError('ERR_SUBAGENT_CAPABILITY', `provider "${provider.name}" has no outputSchema capability, so it cannot take mcpServer's outputSchema`)
  return { ...config, enableRunInBackground: false }
}

/** The connection's parent agent: made at the first call, released when the connection closes. */
function connectionParent(host: McpHost, config: McpServerConfig) {
  let agent: Agent | undefined
  return {
    get: () => (agent ??= host.createAgent({ options: config.agentOptions! })),
    async release() {
      const ending = agent
      agent = undefined
      await ending?.dispose()
    },
  }
}

function listed(definition: ToolDefinition, outputSchema?: JsonSchema): Tool {
  return {
    name: definition.name,
    description: definition.description,
    inputSchema: definition.parameters as Tool['inputSchema'],
    ...(outputSchema === undefined ? {} : { outputSchema: outputSchema as Tool['outputSchema'] }),
  }
}

function checker(definition: ToolDefinition): ValidateFunction {
  return argumentValidator(definition.parameters)
}

/** A job tool: its value rendered, its failure an error result. */
function plainTool(definition: ToolDefinition): Served {
  return {
    definition,
    listing: listed(definition),
    check: checker(definition),
    async call(args, exec) {
      const outcome = await attempt(definition, args, exec)
      return outcome.ok ? text(render(definition, outcome.value)) : outcome.error
    },
  }
}

/** The `subagent` tool: a fresh library tool per call, noting its run for progress and the structured value. */
function delegationTool(host: McpHost, config: SubagentToolConfig, schema: JsonSchema | undefined): Served {
  // Checks the config once, up front, and gives the listing.
  const template = createSubagentTool(host, config)
  return {
    definition: template,
    listing: listed(template, schema),
    check: checker(template),
    async call(args, exec, extra) {
      let run: SubagentRun | undefined
      let stopProgress = () => {}
      const token = extra._meta?.progressToken
      const call = delegationCall(host, config, schema, (started) => {
        run = started
        if (token !== undefined) stopProgress = watchProgress(host, started.id, ({ progress, message }) => {
          // A notification that cannot be sent (the client left) is no failure of the call.
          extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress, message } }).catch(() => {})
        })
      })
      try {
        const outcome = await attempt(call, args, exec)
        if (!outcome.ok) return outcome.error
        if (schema === undefined || run === undefined) return text(render(call, outcome.value))
        // Only a completed run gets here, and a completed structured run carries its value. Its
        // text is the value as JSON, as the MCP spec asks of a tool with structured content (a
        // client that reads only `content` gets the answer too).
        const { structured } = (await run.result) as SubagentResult
        return { ...text(JSON.stringify(structured)), structuredContent: structured as Record<string, unknown> }
      } finally {
        stopProgress()
      }
    },
  }
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: CallToolResult }

/** Runs a library tool; its failure becomes an MCP error result with the text the model would read. */
async function attempt(definition: ToolDefinition, args: Record<string, unknown>, exec: ToolExecution): Promise<Outcome> {
  try {
    return { ok: true, value: await definition.execute(args, exec) }
  } catch (error) {
    const message = error instanceof ToolError ? error.message : `tool "${definition.name}" failed: ${error instanceof Error ? error.message : String(error)}`
    return { ok: false, error: { ...text(message), isError: true } }
  }
}

function render(definition: ToolDefinition, value: unknown): string {
  if (definition.render) return definition.render(value)
  return typeof value === 'string' ? value : (JSON.stringify(value) ?? '')
}

function text(value: string): CallToolResult {
  return { content: [{ type: 'text', text: value }] }
}

