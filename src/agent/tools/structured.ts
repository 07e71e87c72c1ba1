/**
 * The structured-output runtime (CONTRACT.md §4), installed on one child. The tool stages a
 * valid value under its own execution; the value is committed only when that execution's final
 * result (after every hook) is a success. Commit concludes the turn, and a monotonic guard then
 * denies every later call.
 */
import type { AgentRuntime } from '../loop.js'
import { SECTION_ORDER, type PromptSection } from '../prompt.js'
import type { ToolExecution } from './tools.js'
import { subagentError } from '../../protocol/errors.js'

export const STRUCTURED_OUTPUT_TOOL = 'structured_output'

/**
 * A tool a caller registers (on the host, in an agent module) may not take the runtime's name: a
 * child without `outputSchema` must find no `structured_output` (UNKNOWN_TOOL), and a move reads
 * a successful call of that name as a capture.
 */
export function refuseReservedName(name: string, where: string): void {
  if (name === STRUCTURED_OUTPUT_TOOL) {
    throw subagentError('ERR_SUBAGENT_ARGUMENT', `${where}: the tool name "${STRUCTURED_OUTPUT_TOOL}" is reserved for structured output (a child started with outputSchema gets it): give this tool another name`)
  }
}

export const STRUCTURED_OUTPUT_DESCRIPTION =
  "Report your final structured result. Call this exactly once, when your answer is complete; the arguments must match this tool's parameter schema exactly."

export const STRUCTURED_OUTPUT_INSTRUCTION =
  'When you have your final answer, you MUST report it by calling the `structured_output` tool with arguments matching its parameter schema exactly. Do not finish with a plain text answer: only the tool call counts as your result.'

/** The instruction's place in the system prompt (the end of the tool-guidance band). */
export const STRUCTURED_OUTPUT_SECTION: PromptSection = { id: 'structured-output', order: SECTION_ORDER.toolGuidanceEnd, text: STRUCTURED_OUTPUT_INSTRUCTION }

export const STRUCTURED_OUTPUT_ACK = 'Structured output recorded.'

export interface StructuredCapture {
  readonly captured: boolean
  readonly value: unknown
}

/** `schema` must already have passed checkSchemaSubset. */
export function attachStructuredRuntime(agent: AgentRuntime, schema: object): StructuredCapture {
  const staged = new Map<ToolExecution, unknown>()
  const state = { captured: false, value: undefined as unknown }

  agent.tools.register({
    name: STRUCTURED_OUTPUT_TOOL,
    description: STRUCTURED_OUTPUT_DESCRIPTION,
    parameters: schema,
    concurrencySafe: false,
    execute(args, execution) {
      // A copy: an afterTool hook is handed the call's arguments, and what it does to them is not the call that was checked.
      staged.set(execution, structuredClone(args))
      return { recorded: true }
    },
    render: () => STRUCTURED_OUTPUT_ACK,
  })
  agent.prompt.set(STRUCTURED_OUTPUT_SECTION)
  agent.observeToolResults((execution, result, step) => {
    if (!staged.has(execution)) return
    const value = staged.get(execution)
    staged.delete(execution)
    if (result.isError || state.captured) return
    state.captured = true
    state.value = value
    step.conclude()
  })
  restoreCapture(agent, state)
  agent.tools.guard(({ name }) =>
    state.captured ? `structured output already recorded: the run is complete, so \`${name}\` is not executed` : undefined,
  )
  return state
}

/**
 * A child rebuilt from its session (moved to another runner) keeps a value it already captured:
 * the arguments of its `structured_output` call whose result was a success.
 */
function restoreCapture(agent: AgentRuntime, state: { captured: boolean; value: unknown }): void {
  const { events, header } = agent.session
  const args = new Map<string, string>()
  for (let i = header.seedLength ?? 0; i < events.length; i++) {
    const event = events[i]!
    if (event.type === 'assistant/message') {
      for (const block of event.data.content) if (block.type === 'tool-call' && block.name === STRUCTURED_OUTPUT_TOOL) args.set(block.id, block.arguments)
    } else if (event.type === 'tool/result' && event.data.name === STRUCTURED_OUTPUT_TOOL && !event.data.isError && args.has(event.data.callId)) {
      state.captured = true
      const text = args.get(event.data.callId)!
      state.value = text.trim() === '' ? {} : JSON.parse(text)
      return
    }
  }
}
