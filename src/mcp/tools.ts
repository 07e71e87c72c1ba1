/**
 * `mcpTools(client, { prefix? })`: a connected MCP client's tools as host tools. Register them
 * with `host.tools.register`: children on every transport then call them through the host (host
 * tools are served to runners over RPC), so the MCP connection and its credentials stay on the
 * host, and the tool filter applies to them as to any tool.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js'
import { defineTool, ToolError, type ToolDefinition } from '../index.js'
import { subagentError } from '../protocol/errors.js'
import { subsetSchema } from './schema.js'

export interface McpToolsOptions {
  /** Put before every tool's name (e.g. `github_`), so two servers' tools cannot collide. */
  prefix?: string
}

export type McpToolClient = Pick<Client, 'listTools' | 'callTool'>

export async function mcpTools(client: McpToolClient, options: McpToolsOptions = {}): Promise<ToolDefinition[]> {
  if (typeof client?.listTools !== 'function' || typeof client.callTool !== 'function') throw subagentError('ERR_SUBAGENT_ARGUMENT', 'mcpTools needs a connected MCP client (the SDK\'s Client, after connect())')
  const prefix = options.prefix ?? ''
  if (typeof prefix !== 'string') throw subagentError('ERR_SUBAGENT_ARGUMENT', 'mcpTools prefix must be a string')
  const served = new Map<string, string>()
  return (await listAll(client)).map((tool) => {
    const definition = hostTool(client, tool, prefix)
    const other = served.get(definition.name)
    if (other !== undefined) throw subagentError('ERR_SUBAGENT_DEFINITION', `MCP tools "${other}" and "${tool.name}" would both be the host tool "${definition.name}": leave one of them out by filtering what the client's listTools returns`)
    served.set(definition.name, tool.name)
    return definition
  })
}

/**
 * A host tool's name for an MCP tool's: MCP names may hold `.` and `/` (`files.read`), which
 * model APIs refuse in a function's name; each such character becomes `_`.
 */
const hostName = (prefix: string, name: string) => `${prefix}${name}`.replace(/[^A-Za-z0-9_-]/g, '_')

async function listAll(client: McpToolClient): Promise<Tool[]> {
  const tools: Tool[] = []
  let cursor: string | undefined
  do {
    const page = await client.listTools(cursor === undefined ? undefined : { cursor })
    tools.push(...page.tools)
    cursor = page.nextCursor
  } while (cursor !== undefined)
  return tools
}

function hostTool(client: McpToolClient, tool: Tool, prefix: string): ToolDefinition {
  const name = hostName(prefix, tool.name)
  try {
    return defineTool({
      name,
      description: tool.description ?? tool.title ?? `The MCP tool ${tool.name}.`,
      parameters: subsetSchema(tool.inputSchema, tool.name) as Tool['inputSchema'],
      async execute(args, exec) {
        let result: CallToolResult
        try {
          result = (await client.callTool({ name: tool.name, arguments: args }, undefined, { signal: exec.signal })) as CallToolResult
        } catch (error) {
          throw new ToolError(`MCP tool "${tool.name}" failed: ${error instanceof Error ? error.message : String(error)}`)
        }
        if (result.isError) throw new ToolError(textOf(result) || `MCP tool "${tool.name}" reported an error without text`)
        return textOf(result)
      },
    })
  } catch (error) {
    throw subagentError('ERR_SUBAGENT_DEFINITION', `MCP tool "${tool.name}" cannot be a host tool as "${name}": ${error instanceof Error ? error.message : String(error)}`)
  }
}

/** The text a model reads: the text blocks, other blocks named, or the structured value when that is all there is. */
function textOf(result: CallToolResult): string {
  const parts = (result.content ?? []).map((block) => {
    switch (block.type) {
      case 'text':
        return block.text
      case 'resource_link':
        return `[resource ${block.uri}]`
      case 'resource':
        return 'text' in block.resource ? block.resource.text : `[resource ${block.resource.uri}]`
      default:
        return `[${block.type} ${'mimeType' in block ? block.mimeType : ''}]`.replace(' ]', ']')
    }
  })
  if (parts.length === 0 && result.structuredContent !== undefined) return JSON.stringify(result.structuredContent)
  return parts.join('\n')
}
