/**
 * A library tool run by the AI SDK: its JSON Schema as the tool's input schema (checked the way
 * the library checks arguments), its execution given the AI SDK's call id and abort signal, and
 * its failures thrown with the exact text the library would give the model (the AI SDK sends a
 * thrown error's message back to the model as the tool's error result).
 */
import { jsonSchema, tool, type Tool } from 'ai'
import type { AgentView, ToolDefinition, ToolExecution } from '../index.js'
// The library's own tool-call pipeline, so a call reads the same as in a library agent.
import { argumentsCheck, executeTool, renderText } from '../agent/tools/tool-call.js'
import type { AiSdkModelMessage } from './parent-from-messages.js'

/** What the AI SDK passes to `execute` (both versions), as far as it is used here. */
export interface ToolCallOptionsLike {
  toolCallId: string
  messages: readonly AiSdkModelMessage[]
  abortSignal?: AbortSignal
}

export type ParentOf = (options: ToolCallOptionsLike) => AgentView

export function asAiSdkTool<Args extends Record<string, unknown>>(definition: ToolDefinition<Args>, parentOf: ParentOf): Tool<Args, string> {
  return tool<Args, string>({
    description: definition.description,
    inputSchema: inputSchemaOf(definition),
    execute: async (input, options) => render(definition, await runTool(definition, input, toolExecution(parentOf(options), options))),
  })
}

// Every version knows a schema by Symbol.for('vercel.ai.schema'), but `ai` 5 runs `validate` only
// on objects also marked with this one (its own jsonSchema() sets both; `ai` 6 and 7 ignore it).
const AI5_VALIDATOR = Symbol.for('vercel.ai.validator')

export function inputSchemaOf<Args>(definition: ToolDefinition<Args>) {
  const check = argumentsCheck(definition)
  const schema = jsonSchema<Args>(definition.parameters as Parameters<typeof jsonSchema>[0], {
    validate: (value) => {
      const invalid = check(value)
      return invalid ? { success: false, error: new Error(invalid.message) } : { success: true, value: value as Args }
    },
  })
  ;(schema as unknown as Record<symbol, unknown>)[AI5_VALIDATOR] = true
  return schema
}

export function toolExecution(agent: AgentView, options: ToolCallOptionsLike): ToolExecution {
  return {
    agent,
    callId: options.toolCallId,
    // Without the AI SDK's signal nothing cancels the call, as for a library tool never cancelled.
    signal: options.abortSignal ?? new AbortController().signal,
    // An AI SDK loop decides its own steps (stopWhen); there is no turn here to conclude.
    concludeTurn: () => {},
  }
}

/** Runs the tool; a failure throws an Error whose message is what the model should read. */
export async function runTool<Args>(definition: ToolDefinition<Args>, input: Args, exec: ToolExecution): Promise<unknown> {
  const executed = await executeTool(definition, input, exec)
  if (!executed.ok) throw new ModelFacingError(executed.error.message, executed.thrown ?? executed.error)
  return executed.value
}

/**
 * A tool failure the model reads as its message alone: `ai` 5 and 6 send the model a thrown
 * error's message, `ai` 7 its `toString()` ("Error: message"), so that says the message too.
 */
class ModelFacingError extends Error {
  constructor(message: string, cause: unknown) {
    super(message, { cause })
  }

  override toString(): string {
    return this.message
  }
}

export function render<Args>(definition: ToolDefinition<Args>, value: unknown): string {
  return renderText(definition, value)
}
