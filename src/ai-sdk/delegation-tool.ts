/**
 * `delegationTool(host, config)`: the library's `subagent` tool as an AI SDK tool, so a parent
 * driven by the AI SDK's own `generateText` / `streamText` delegates to children (inline or on
 * worker threads). Without `outputSchema` it is the model-facing `subagent` tool itself (same
 * arguments, descriptions, background jobs and failure texts), streaming the child's text as
 * preliminary results; with it the child must report a
 * structured result, the call waits for it (foreground only), and the tool returns that value.
 */
import { randomUUID } from 'node:crypto'
import { tool, type Tool } from 'ai'
import {
  createSubagentTool,
  toJsonSchema,
  type AgentView,
  type Host,
  type JsonSchema,
  type SchemaLike,
  type SubagentProvider,
  type SubagentResult,
  type StructuredOf,
  type SubagentToolConfig,
} from '../index.js'
import { inputSchemaOf, runTool, toolExecution, type ParentOf } from './as-tool.js'
import { progressTool } from './progress.js'
import { parentFromMessages } from './parent-from-messages.js'
import { subagentError } from '../protocol/errors.js'

/**
 * `createSubagentTool`'s config (`toolName` only names the tool in its own messages: the model
 * calls it by its key in the AI SDK's `tools`), plus:
 */
export interface DelegationToolConfig extends SubagentToolConfig {
  /**
   * The delegating agent. Default: a view built from the messages the AI SDK passes to
   * `execute` (`parentFromMessages`), so a fork child sees the conversation's completed turns.
   */
  parent?: AgentView
  /** The id of that default view (its children's `parentSession`, its jobs' owner); default: one random id per tool. */
  parentId?: string
  /**
   * The child must report a result matching this schema (a JSON Schema, a zod 4 schema or an AI
   * SDK schema; converted on the host by `toJsonSchema`), which the tool returns. The value is
   * checked against the JSON Schema, not re-parsed by zod (no transforms run).
   */
  outputSchema?: SchemaLike
}

/** The model's arguments, as for the `subagent` tool. */
export type DelegationInput = { description: string; prompt: string; run_in_background?: boolean }
export type StructuredDelegationInput = { description: string; prompt: string }

/** The structured value's type, read from `outputSchema` (a zod schema's input, an AI SDK schema's type, a JSON Schema literal's shape). */
export type { StructuredOf }

type DelegationHost = Pick<Host, 'spawn' | 'fork' | 'jobs' | 'agents'>

export function delegationTool<S extends SchemaLike>(host: DelegationHost, config: DelegationToolConfig & { outputSchema: S }): Tool<StructuredDelegationInput, StructuredOf<S>>
export function delegationTool(host: DelegationHost, config: DelegationToolConfig): Tool<DelegationInput, string>
export function delegationTool(host: DelegationHost, config: DelegationToolConfig): Tool<DelegationInput, string> | Tool<StructuredDelegationInput, unknown> {
  if (typeof config !== 'object' || config === null) throw subagentError('ERR_SUBAGENT_ARGUMENT', 'delegationTool needs a config: a subagent tool config, plus parent?, parentId? and outputSchema?')
  const { parent, parentId, outputSchema, ...toolConfig } = config
  if (parent !== undefined && parentId !== undefined) throw subagentError('ERR_SUBAGENT_ARGUMENT', 'delegationTool takes parent or parentId, not both: parentId names the view built when no parent is given')
  if (parent !== undefined && (typeof parent !== 'object' || parent === null || typeof parent.id !== 'string')) {
    throw subagentError('ERR_SUBAGENT_ARGUMENT', 'delegationTool parent must be an agent view { id, options, session: { header, events } }')
  }
  if (parentId !== undefined && (typeof parentId !== 'string' || parentId === '')) throw subagentError('ERR_SUBAGENT_ARGUMENT', 'delegationTool parentId must be a non-empty string')
  // Config as createSubagentTool's: without agentOptions.provider (or a parent whose model the
  // children inherit), a child has no model, and the model reads that in the call's failure
  // (CONTRACT.md §1.6), as with the subagent tool itself.
  const id = parentId ?? `ai-sdk-${randomUUID()}`
  const parentOf: ParentOf = (options) => parent ?? parentFromMessages(host, options.messages, { id })
  if (outputSchema === undefined) return progressTool(host, toolConfig, parentOf)
  return structuredTool(host, toolConfig, toJsonSchema(outputSchema, { what: 'delegationTool outputSchema' }), parentOf)
}

function structuredTool(host: DelegationHost, config: SubagentToolConfig, schema: JsonSchema, parentOf: ParentOf): Tool<StructuredDelegationInput, unknown> {
  if (config.enableRunInBackground === true) {
    throw subagentError('ERR_SUBAGENT_ARGUMENT', 'delegationTool with outputSchema runs in the foreground only: leave enableRunInBackground unset or false')
  }
  const foreground: SubagentToolConfig = { ...config, enableRunInBackground: false }
  // Checks the config once, and gives the tool's name, description and arguments.
  const template = createSubagentTool(host, foreground)
  const base: SubagentProvider = config.provider === 'spawn' ? host.spawn : config.provider === 'fork' ? host.fork : config.provider
  if (!base.capabilities.outputSchema) throw subagentError('ERR_SUBAGENT_CAPABILITY', `provider "${base.name}" has no outputSchema capability, so it cannot take delegationTool's outputSchema`)

  return tool<StructuredDelegationInput, unknown>({
    description: template.description,
    inputSchema: inputSchemaOf<StructuredDelegationInput>(template),
    async execute(input, options) {
      // One `subagent` tool per call, over a provider that adds the schema and keeps the run's
      // result: the call itself (checks, waiting, disposal, failure texts) stays the library's.
      let result: Promise<SubagentResult> | undefined
      const provider: SubagentProvider = {
        name: base.name,
        capabilities: base.capabilities,
        inheritsParentContext: base.inheritsParentContext,
        async start(request) {
          const run = await base.start({ ...request, outputSchema: schema })
          result = run.result
          return run
        },
        async run(request) {
          const value = await base.run({ ...request, outputSchema: schema })
          result = Promise.resolve(value)
          return value
        },
      }
      const call = createSubagentTool(host, { ...foreground, provider })
      await runTool(call, input, toolExecution(parentOf(options), options))
      if (!result) throw subagentError('ERR_SUBAGENT_NO_CHILD', 'the subagent tool completed without starting a child')
      // Only a completed run gets here, and a completed structured run carries its value.
      return (await result).structured
    },
  })
}
