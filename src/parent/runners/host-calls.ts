/**
 * What the host serves a child running elsewhere: its host-placed model and host tools. The host
 * trusts nothing the runner sends, so every call is checked against what this child may do,
 * whatever the runner's own loop already checked: its own model only, tools it can see (its
 * filter), the delegated approval rule, the tool's argument schema. A model call is the child's
 * own in what it costs, what the model is told and what it reads: its model id, its `maxTokens`
 * and the system prompt come from the spec the host holds, and the conversation from the host's
 * own copy of the child's session (the events the host checked, in the order the runner recorded
 * them, which is the order the loop reads them in). The runner says only which tools it sees
 * (their guidance is the host's: of its own tools, and of the module's as the host loaded it).
 * The model's text deltas the host records itself, each as the model streams it (the RPC server
 * holds them for the runner until the call's result): the runner records each as it arrives and
 * does not send it back, so no runner can put words in the model's stream either.
 */
import { childSystemPrompt } from '../../agent/child.js'
import { runToolCall, unknownTool } from '../../agent/tools/tool-call.js'
import type { ToolDefinition } from '../../agent/tools/tools.js'
import type { AgentView } from '../../agent/view.js'
import type { ChildSpec } from '../../protocol/shapes/child.js'
import { textOf } from '../../protocol/shapes/content.js'
import type { ToolRef, ToolSchema } from '../../protocol/shapes/model.js'
import { Conversation } from '../../agent/models/conversation.js'
import { untilAbort } from '../../agent/models/until-abort.js'
import { MeteredModel } from '../../agent/models/metered.js'
import type { ModelRequest } from '../../agent/models/model.js'
import type { CallContext, RpcHandlers, RpcPayload, RpcResult, ToolReply } from '../../protocol/rpc.js'
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
  /** The module tools of the runner it is on now, by the index a model call names them with. */
  moduleTools(): readonly ToolSchema[]
  /** Records a text delta of its host model as its next event. */
  recordText(text: string): void
  /** Told as the host makes a model request for it. */
  requested(): void
}

/**
 * One child's host calls, as the RPC server serves them. Made with the child, so it holds what
 * every call reads (the conversation over the host's copy of the session) and nothing a call may
 * not need: the system prompt is composed at the first model call, which a child whose model is
 * the module's never makes.
 */
export class HostCalls implements RpcHandlers {
  readonly #child: CallingChild
  readonly #conversation: Conversation
  #system: string | undefined
  /** The guided tools `#system` was rendered with. */
  #systemKey = ''

  constructor(child: CallingChild) {
    this.#child = child
    this.#conversation = new Conversation(child.view.session.events)
  }

  async model({ provider, tools }: RpcPayload<'model'>, { signal, emit }: CallContext): Promise<RpcResult<'model'>> {
    const { spec, placement, ledger } = this.#child
    if (provider !== spec.options.provider) {
      throw new ProtocolError(`child ${spec.id} may call only its own model "${spec.options.provider ?? ''}", not "${provider}"`)
    }
    const model = placement.models.get(provider)
    if (!model) throw subagentError('ERR_SUBAGENT_UNKNOWN_NAME', `no host model is registered under "${provider}": register it with host.models.register() before the child starts`)
    // Read now, as the call arrives: the events before it in the runner's record, and no later one.
    const schemas = tools && schemasOf(tools, this.#child.moduleTools())
    const request: ModelRequest = { model: spec.options.model ?? provider, system: this.#systemPrompt(schemas), messages: this.#conversation.messages(), signal }
    if (schemas) request.tools = schemas
    if (spec.options.maxTokens !== undefined) request.maxTokens = spec.options.maxTokens
    // Metered here, where every chunk is read anyway, and not by the metered model's own iterator.
    const metered = model instanceof MeteredModel ? model : undefined
    return ledger.model(async () => {
      const meter = metered?.meter()
      this.#child.requested()
      try {
        // Read as the inline loop reads it: a cancelled call stops waiting at once, and the model
        // is told to return, even a model that ignores the signal.
        for await (const chunk of untilAbort((metered?.model ?? model).stream(request), signal)) {
          // Checked here, as the inline loop does, so the child gets the same error either way.
          if (!isStreamChunk(chunk)) throw subagentError('ERR_SUBAGENT_MODEL_STREAM', `the model emitted a malformed stream chunk ${describeShape(chunk)}`)
          meter?.see(chunk)
          // Recorded as emitted: a call cancelled, or muted by the child's cancel, records nothing more.
          if (emit(chunk) && chunk.type === 'text-delta' && chunk.text !== '') this.#child.recordText(chunk.text)
        }
      } finally {
        meter?.close()
      }
      // A limit spent by now (this step's tokens, or one above the child) stops the child as its runner records the step.
      const limit = placement.refusal()
      return limit ? { limit } : null
    })
  }

  async tool({ name, callId, args }: RpcPayload<'tool'>, { signal }: CallContext): Promise<ToolReply> {
    const tool = this.#visible(name)
    if (!tool) throw unknownTool(name)
    const { view, ledger, placement } = this.#child
    // Its step spent a limit, and the stop is on its way: the tool does not run, as inline, where the stop comes first.
    if (placement.refusal()) return abandoned(signal)
    return ledger.tool(name, callId, signal, async (toolSignal) => {
      let concluded = false
      const outcome = await runToolCall(tool, args, { agent: view, callId, signal: toolSignal, concludeTurn: () => void (concluded = true) }, true)
      // The runner's loop gives the model this error's exact text and code, as its own tools' errors.
      if (!outcome.ok) throw outcome.error
      const clone = outcome.value === undefined ? undefined : tryClone(outcome.value)
      return { text: textOf(outcome.content), concluded, ...(clone ? { value: clone.value } : {}) }
    })
  }

  /**
   * The host's word on the step its runner recorded before this call (a module model's: the host
   * counted its tokens from that record, which came first): the limit spent by now, if one is.
   * Its runner runs none of the step's calls until this answer, so the host, not the runner,
   * decides whether they run (CONTRACT.md §11).
   */
  async step(): Promise<RpcResult<'step'>> {
    const limit = this.#child.placement.refusal()
    return limit ? { limit } : null
  }

  /** A host tool the child sees: registered when it was created, and let through its filter. */
  #visible(name: string): ToolDefinition | undefined {
    const tool = this.#child.placement.tools.get(name)
    return tool && this.#passes(name) ? tool : undefined
  }

  #passes(name: string): boolean {
    const { allow, deny } = this.#child.spec.toolFilter ?? {}
    return (!allow || allow.includes(name)) && !deny?.includes(name)
  }

  /**
   * The child's system prompt for a call listing `tools`, as its loop renders it inline: the
   * guidance of each tool listed that it sees, in the call's order, a host tool's and a module
   * tool's alike, each as the host has it. Most calls list the same guided tools as the last one.
   */
  #systemPrompt(tools: readonly ToolSchema[] = NO_TOOLS): string {
    let key = ''
    for (const { name } of tools) if (this.#guided(name)) key += `${name}\0`
    if (this.#system === undefined || this.#systemKey !== key) {
      const guided = tools.map(({ name }) => this.#guided(name)).filter((tool) => tool !== undefined)
      this.#system = childSystemPrompt(this.#child.spec, guided)
      this.#systemKey = key
    }
    return this.#system
  }

  /** The tool of this name the child sees, when it has guidance for the system prompt. */
  #guided(name: string): ToolDefinition | undefined {
    const { placement } = this.#child
    const tool = placement.tools.get(name) ?? placement.moduleTools.get(name)
    return tool?.guidance && this.#passes(name) ? tool : undefined
  }
}

const NO_TOOLS: readonly ToolSchema[] = []

/** A call that will not be served: it ends as its runner cancels it (or the child ends), with that reason. */
function abandoned(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(signal.reason)
    else signal.addEventListener('abort', () => reject(signal.reason), { once: true })
  })
}

/** The tools a call names, each its schema: an index into the runner's module tools is resolved, and must be in the table. */
function schemasOf(tools: readonly ToolRef[], table: readonly ToolSchema[]): ToolSchema[] {
  return tools.map((tool) => {
    if (typeof tool !== 'number') return tool
    const schema = table[tool]
    if (!schema) throw new ProtocolError(`a model call named module tool ${tool}, and the runner's table has ${table.length}`)
    return schema
  })
}
