/**
 * What the host serves a child running elsewhere: its host-placed model and host tools. The host
 * trusts nothing the runner sends, so every call is checked against what this child may do,
 * whatever the runner's own loop already checked: its own model only, tools it can see (its
 * filter), the delegated approval rule, the tool's argument schema. A model call is the child's
 * own in what it costs and who the model is told it is: its model id, its `maxTokens` and the
 * system prompt come from the spec the host holds, never from the request.
 */
import { childSystemPrompt } from '../../agent/child.js'
import { runToolCall, unknownTool } from '../../agent/tools/tool-call.js'
import type { ToolDefinition } from '../../agent/tools/tools.js'
import type { AgentView } from '../../agent/view.js'
import type { AgentOptions, ChildSpec } from '../../protocol/shapes/child.js'
import { textOf } from '../../protocol/shapes/content.js'
import type { ModelRequestData } from '../../protocol/shapes/model.js'
import type { RpcHandlers } from '../../protocol/rpc.js'
import { ProtocolError } from '../../protocol/validate.js'
import { isStreamChunk } from '../../protocol/validators.js'
import { describeShape, tryClone } from '../../protocol/values.js'
import type { Placement } from '../types.js'
import type { CallLedger } from './call-ledger.js'
import { subagentError } from '../../protocol/errors.js'

export interface CallingChild {
  /** The host's view of the child: what host tools see as `exec.agent`. */
  view: AgentView
  spec: ChildSpec
  /** The host models and tools registered when the child was created. */
  placement: Placement
  /** Its host calls, which outlive the runner it runs on (a moved child's tool is not run twice). */
  ledger: CallLedger
}

export function hostCalls(child: CallingChild): RpcHandlers {
  const { view, spec, placement, ledger } = child
  const { allow, deny } = spec.toolFilter ?? {}
  const visible = (name: string): ToolDefinition | undefined => {
    const tool = placement.tools.get(name)
    return tool && (!allow || allow.includes(name)) && !deny?.includes(name) ? tool : undefined
  }
  const system = childSystemPrompt(spec, [...placement.tools.keys()].flatMap((name) => visible(name) ?? []))
  return {
    async model({ provider, request }, { signal, emit }) {
      if (provider !== spec.options.provider) {
        throw new ProtocolError(`child ${spec.id} may call only its own model "${spec.options.provider ?? ''}", not "${provider}"`)
      }
      const model = placement.models.get(provider)
      if (!model) throw subagentError('ERR_SUBAGENT_UNKNOWN_NAME', `no host model is registered under "${provider}": register it with host.models.register() before the child starts`)
      return ledger.model(async () => {
        for await (const chunk of model.stream({ ...asChild(request, spec.options, provider, system), signal })) {
          if (signal.aborted) break
          // Checked here, as the inline loop does, so the child gets the same error either way.
          if (!isStreamChunk(chunk)) throw subagentError('ERR_SUBAGENT_MODEL_STREAM', `the model emitted a malformed stream chunk ${describeShape(chunk)}`)
          emit(chunk)
        }
        return null
      })
    },
    async tool({ name, callId, args }, { signal }) {
      const tool = visible(name)
      if (!tool) throw unknownTool(name)
      return ledger.tool(name, callId, signal, async (toolSignal) => {
        let concluded = false
        const outcome = await runToolCall(tool, args, { agent: view, callId, signal: toolSignal, concludeTurn: () => void (concluded = true) }, true)
        // The runner's loop gives the model this error's exact text and code, as its own tools' errors.
        if (!outcome.ok) throw outcome.error
        const clone = outcome.value === undefined ? undefined : tryClone(outcome.value)
        return { text: textOf(outcome.content), concluded, ...(clone ? { value: clone.value } : {}) }
      })
    },
  }
}

/** The runner's conversation and tools, with the model id, output cap and system prompt the child was given. */
function asChild(request: ModelRequestData, options: AgentOptions, provider: string, system: string): ModelRequestData {
  const { messages, tools } = request
  // As the loop does: the model id defaults to the provider name.
  const own: ModelRequestData = { model: options.model ?? provider, system, messages }
  if (tools) own.tools = tools
  if (options.maxTokens !== undefined) own.maxTokens = options.maxTokens
  return own
}
