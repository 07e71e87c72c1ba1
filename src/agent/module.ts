/**
 * Agent modules: the models, tools and hooks every agent of a host uses. The host imports the
 * module, and so does every worker thread, so both transports run the same code.
 */
import type { ContentBlock } from '../protocol/shapes/content.js'
import type { ToolErrorCode } from '../protocol/shapes/session.js'
import type { Model } from './models/model.js'
import { defineTool, type ToolDefinition } from './tools/tools.js'
import { refuseReservedName } from './tools/structured.js'
import type { AgentView } from './view.js'
import { subagentError } from '../protocol/errors.js'

export interface ToolCallInfo {
  id: string
  name: string
  /** Parsed arguments when they were valid JSON, else the raw text. */
  arguments: unknown
}

export interface ToolResult {
  isError: boolean
  code?: ToolErrorCode
  content: ContentBlock[]
  value?: unknown
}

export interface AgentHooks {
  /** Runs before each model request; 'reject' ends the turn `blocked`. */
  beforeStep?(agent: AgentView): 'enter' | 'reject' | Promise<'enter' | 'reject'>
  /** Sees each tool result and may replace it; the returned result is authoritative. */
  afterTool?(call: ToolCallInfo, result: ToolResult): ToolResult | Promise<ToolResult>
}

export interface AgentModule {
  models?: Record<string, Model>
  tools?: ToolDefinition[]
  hooks?: AgentHooks
}

export function defineAgentModule(module: AgentModule): AgentModule {
  if (typeof module !== 'object' || module === null) throw subagentError('ERR_SUBAGENT_DEFINITION', 'defineAgentModule needs an object')
  for (const [name, model] of Object.entries(module.models ?? {})) {
    if (typeof model?.stream !== 'function') throw subagentError('ERR_SUBAGENT_DEFINITION', `agent module model "${name}" has no stream() method`)
  }
  const seen = new Set<string>()
  // Checked, and with zod or AI SDK parameters converted to JSON Schema once, where the module loads.
  const tools = (module.tools ?? []).map((tool) => {
    const defined = defineTool(tool)
    refuseReservedName(defined.name, 'agent module')
    if (seen.has(defined.name)) throw subagentError('ERR_SUBAGENT_DUPLICATE', `agent module defines tool "${defined.name}" twice`)
    seen.add(defined.name)
    return defined
  })
  for (const hook of ['beforeStep', 'afterTool'] as const) {
    const fn = module.hooks?.[hook]
    if (fn !== undefined && typeof fn !== 'function') throw subagentError('ERR_SUBAGENT_DEFINITION', `agent module hook ${hook} must be a function`)
  }
  return module.tools === undefined ? module : { ...module, tools }
}
