/**
 * The agent loop (CONTRACT.md §2a). A turn: `turn/start`, the user message, then steps of one
 * model request each (text deltas streamed as `assistant/chunk`, one `assistant/message`), then
 * the step's tool calls (concurrent up to the limit, results appended in model order), until the
 * model stops calling tools, a tool concludes the turn, or the turn is cut short. Every turn ends
 * with exactly one `turn/end`; failures become its reason, never an exception.
 */
import type { ContentBlock, ToolCallBlock } from '../protocol/shapes/content.js'
import type { SessionEvent, SessionHeader, ToolErrorCode, ToolResultData, TurnEndReason, Usage } from '../protocol/shapes/session.js'
import type { FinishReason, StreamChunk } from '../protocol/shapes/stream.js'
import { isContentBlock, isStreamChunk, isToolErrorCode } from '../protocol/validators.js'
import { describeShape, MAX_VALUE_DEPTH, tryClone, withinDepth } from '../protocol/values.js'
import { messageOf, subagentError } from '../protocol/errors.js'
import { isStandIn, type Model, type ModelRequest } from './models/model.js'
import { Conversation } from './models/conversation.js'
import { untilAbort } from './models/until-abort.js'
import type { AgentHooks, ToolResult } from './module.js'
import { PromptSections } from './prompt.js'
import { Session } from './session.js'
import { guidanceSections, ToolError, toolSchema, ToolScope, type ToolExecution, type ToolSource } from './tools/tools.js'
import { runModelCall } from './tools/tool-call.js'
import { readTurns, stopReasonOf } from './outcome.js'
import { asLimitReason, limitDiagnostic, limitReason, limitStop, type LimitReason } from './limit-stop.js'
import type { Agent, AgentOptions, AgentView, TurnOutcome } from './view.js'

export { messageOf }

/**
 * Model requests one turn may make when no `limits.maxSteps` is given (a header's `limits`, set by
 * `createAgent({ limits })`, `createHost({ limits })`, a start request or the subagent tool's
 * config): a model that always answers with a tool call ends its turn instead of looping forever.
 */
export const DEFAULT_MAX_STEPS = 1000

export interface AgentEnvironment {
  models: { get(name: string): Model | undefined }
  tools: ToolSource
  hooks: AgentHooks
  maxParallelToolCalls: number
  /** A delegated child: it can never ask for approval, so `needsApproval` tools are denied. */
  delegated: boolean
  /** Awaited before a turn's first step (the host's agent module loading). */
  ready?: Promise<unknown>
  /** Asked before every model request: a limit the host says is spent ends the turn instead. */
  admit?: () => LimitReason | undefined
  /**
   * Told the usage a step's model (named by its provider) reported when the step then failed or
   * was cancelled, so it records no message: the host counts a host model's, as it counts what it
   * served a runner's child.
   */
  unrecorded?: (usage: Usage, provider: string) => void
  /** Told as each model request is made, but a stand-in's (whose host makes it): how the host learns of requests it does not serve. */
  requested?: () => void
  /**
   * Asked once a step's calls are recorded, before any of them runs; settles (rejecting) when
   * `signal` aborts. A limit it names cancels the turn with it, so every call is recorded
   * `ABORTED`, as an inline child whose host stops it at that step's record. A runner's child
   * asks its host here where only the host can tell (its module model's tokens against the
   * budgets above it).
   */
  admitCalls?: (signal: AbortSignal) => Promise<LimitReason | undefined>
}

export interface StepContext {
  conclude(): void
}

/** Sees every tool call's final, authoritative result, keyed by its own execution. */
export type ToolResultObserver = (execution: ToolExecution, result: ToolResult, step: StepContext) => void

export interface AgentInit {
  id: string
  options: AgentOptions
  header: SessionHeader
  seed?: readonly SessionEvent[]
  /** What tools see as `exec.agent`; by default the agent itself. */
  view?: AgentView
  /** Run by `dispose()` once the agent is idle: its owner lets go of it (a host unregisters it). */
  release?: () => Promise<void>
}

type StepOutcome = { end: TurnEndReason } | { calls: ToolCallBlock[] }

export class AgentRuntime implements Agent {
  readonly id: string
  readonly options: AgentOptions
  readonly session: Session
  readonly tools: ToolScope
  readonly prompt = new PromptSections()
  readonly #env: AgentEnvironment
  readonly #queue: Array<{ content: ContentBlock[]; source: { kind: string } }> = []
  /** Notices waiting for the next step (CONTRACT.md §13): they never start a turn themselves. */
  readonly #inbox: Array<{ content: ContentBlock[]; source: { kind: string } }> = []
  readonly #beforeModelRequest: Array<() => void> = []
  readonly #observers: ToolResultObserver[] = []
  readonly #conversation: Conversation
  /** The agent's own tokens so far (its steps, never a fork seed's), counted incrementally. */
  #spent = 0
  #counted = 0
  #idle: Promise<void> | undefined
  #turn: AbortController | undefined
  readonly #view: AgentView
  readonly #release: (() => Promise<void>) | undefined
  #disposal: Promise<void> | undefined

  constructor(init: AgentInit, env: AgentEnvironment) {
    this.id = init.id
    this.options = init.options
    this.session = new Session(init.header, init.seed)
    this.#conversation = new Conversation(this.session.events)
    this.#counted = init.header.seedLength ?? 0
    this.tools = new ToolScope(env.tools)
    this.#env = env
    this.#view = init.view ?? this
    this.#release = init.release
  }

  async run(message: string | ContentBlock[]): Promise<TurnOutcome> {
    if (this.#disposal) throw subagentError('ERR_SUBAGENT_DISPOSED', `agent ${this.id} was disposed: create or resume an agent to run another turn`)
    const from = this.session.events.length
    this.followup(message)
    await this.whenIdle()
    const { output, end, usage } = readTurns(this.session.events, from)
    const outcome: TurnOutcome = { output, stopReason: stopReasonOf(end) }
    if (usage) outcome.usage = usage
    if (end?.kind === 'error' || end?.kind === 'blocked') outcome.diagnostic = end.message
    const limit = end?.kind === 'aborted' ? asLimitReason(end.reason) : undefined
    if (limit) outcome.diagnostic = limitDiagnostic(limit)
    return outcome
  }

  dispose(): Promise<void> {
    return (this.#disposal ??= (async () => {
      this.cancel({ kind: 'disposed' })
      await this.whenIdle()
      await this.#release?.()
    })())
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.dispose()
  }

  /**
   * Queues a user message; a turn starts now if the agent is idle: its `turn/start` and this
   * `user/message` are recorded before `followup` returns (a host that published the message
   * records them itself, and its runner does not send them back).
   */
  followup(message: string | ContentBlock[], source: { kind: string } = { kind: 'user' }): void {
    this.#queue.push({ content: toContent(message), source })
    this.#idle ??= this.#drain()
  }

  /**
   * Puts a notice in the agent's inbox (a settlement notice, CONTRACT.md §13). A running turn
   * records it as a user message at its next step, before that step's model request; an idle
   * agent keeps it for its next turn, whose first step takes it. It never starts a turn.
   */
  notify(message: string | ContentBlock[], source: { kind: string }): void {
    if (this.#disposal) return
    this.#inbox.push({ content: toContent(message), source: { ...source } })
  }

  /**
   * Goes on with the open turn of a session rebuilt on another runner (a moved child): the last
   * step's calls that have no result yet run (a host tool's call reaches the host, which does not
   * run it again), then the steps go on. `concluded`: a call of that step already concluded the turn.
   */
  resume(concluded: boolean): void {
    this.#idle ??= this.#drain(() => this.#continueTurn(concluded))
  }

  whenIdle(): Promise<void> {
    return this.#idle ?? Promise.resolve()
  }

  /** Ends the running turn `aborted` with this reason and drops queued messages. */
  cancel(reason: unknown = { kind: 'cancelled' }): void {
    this.#queue.length = 0
    this.#turn?.abort(reason)
  }

  /** Runs before every model request, after the step's hooks are due (e.g. the descriptor). */
  beforeModelRequest(contribution: () => void): void {
    this.#beforeModelRequest.push(contribution)
  }

  observeToolResults(observer: ToolResultObserver): void {
    this.#observers.push(observer)
  }

  async #drain(first?: () => Promise<void>): Promise<void> {
    try {
      // Only a resumed turn waits here: a queued turn starts synchronously, before a cancel in the same frame can drop it.
      if (first) await first()
      for (let next = this.#queue.shift(); next; next = this.#queue.shift()) await this.#runTurn(next.content, next.source)
    } finally {
      this.#idle = undefined
    }
  }

  async #runTurn(content: ContentBlock[], source: { kind: string }): Promise<void> {
    this.session.append('turn/start', {})
    this.session.append('user/message', { content, source })
    await this.#drive((signal) => this.#steps(signal, 0))
  }

  /** The open turn's state, read from the session: the steps it made and the last step's calls without a result. */
  async #continueTurn(concluded: boolean): Promise<void> {
    const { events } = this.session
    let start = events.length - 1
    while (start >= 0 && events[start]!.type !== 'turn/start') start--
    let steps = 0
    let calls: ToolCallBlock[] = []
    for (let i = start + 1; i < events.length; i++) {
      const event = events[i]!
      if (event.type === 'assistant/message') {
        steps++
        calls = event.data.content.filter((block): block is ToolCallBlock => block.type === 'tool-call')
      } else if (event.type === 'tool/result') {
        calls = calls.slice(1)
      }
    }
    await this.#drive(async (signal) => {
      if (this.#env.ready) await this.#env.ready
      if (calls.length > 0 && (await this.#runTools(calls, signal))) concluded = true
      if (signal.aborted) return aborted(signal)
      return concluded ? { kind: 'completed' } : this.#steps(signal, steps)
    })
  }

  /** Runs a turn's steps to its one `turn/end`: a failure becomes its reason, never an exception. */
  async #drive(steps: (signal: AbortSignal) => Promise<TurnEndReason>): Promise<void> {
    const controller = new AbortController()
    this.#turn = controller
    const { signal } = controller
    let reason: TurnEndReason
    try {
      reason = await steps(signal)
    } catch (error) {
      reason = signal.aborted ? aborted(signal) : { kind: 'error', message: `agent loop failed: ${messageOf(error)}` }
    }
    this.#turn = undefined
    this.session.append('turn/end', { reason })
  }

  /** `done`: the steps this turn already made (a moved child's, before its move). */
  async #steps(signal: AbortSignal, done: number): Promise<TurnEndReason> {
    if (this.#env.ready) await this.#env.ready
    const maxSteps = this.session.header.limits?.maxSteps ?? DEFAULT_MAX_STEPS
    for (let steps = done; ; steps++) {
      // A macrotask between steps: timers, aborts and I/O run even when every step resolves at
      // once (a scripted or cached model); a microtask would not let them.
      if (steps > 0) await nextMacrotask()
      if (signal.aborted) return aborted(signal)
      if (steps >= maxSteps) return limitStop('maxSteps', maxSteps)
      const refused = this.#refusal()
      if (refused) return { kind: 'aborted', reason: refused }
      this.#takeNotices()
      for (const contribution of this.#beforeModelRequest) contribution()
      const { beforeStep } = this.#env.hooks
      if (beforeStep) {
        const stopped = abortPromise(signal)
        const verdict = await Promise.race([beforeStep(this.#view), stopped.promise]).finally(() => stopped.dispose())
        if (signal.aborted) return aborted(signal)
        if (verdict === 'reject') return { kind: 'blocked', message: 'a beforeStep hook rejected the step' }
      }
      const outcome = await this.#modelStep(signal)
      if ('end' in outcome) return outcome.end
      const concluded = await this.#runTools(outcome.calls, signal)
      if (signal.aborted) return aborted(signal)
      if (concluded) return { kind: 'completed' }
    }
  }

  /** The inbox's notices become user messages of the running turn, in the order they came. */
  #takeNotices(): void {
    for (let next = this.#inbox.shift(); next; next = this.#inbox.shift()) this.session.append('user/message', next)
  }

  async #modelStep(signal: AbortSignal): Promise<StepOutcome> {
    const { provider } = this.options
    if (provider === undefined) {
      return { end: { kind: 'error', message: 'the agent has no model: set options.provider to a registered model name' } }
    }
    const model = this.#env.models.get(provider)
    if (!model) return { end: { kind: 'error', message: `no model registered under provider "${provider}"` } }

    const request: ModelRequest = { model: this.options.model ?? provider, messages: this.#conversation.messages(), signal }
    const tools = this.tools.visible()
    const system = this.prompt.render(guidanceSections(tools))
    if (system !== undefined) request.system = system
    if (tools.length > 0) request.tools = tools.map(toolSchema)
    if (this.options.maxTokens !== undefined) request.maxTokens = this.options.maxTokens

    // Joined once at the end: \`+=\` a chunk would keep the answer as a rope of every chunk, as long
    // as its transcript lives.
    const texts: string[] = []
    // A transport's stand-in recorded its deltas itself, and stops at its signal by itself.
    const standsIn = isStandIn(model)
    const calls: ToolCallBlock[] = []
    let usage: Usage | undefined
    let finish: FinishReason | undefined
    try {
      // A stand-in's request is made by the host, which knows it.
      if (!standsIn) this.#env.requested?.()
      for await (const chunk of standsIn ? model.stream(request) : untilAbort(model.stream(request), signal)) {
        if (!isStreamChunk(chunk)) throw subagentError('ERR_SUBAGENT_MODEL_STREAM', `the model emitted a malformed stream chunk ${describeShape(chunk)}`)
        switch (chunk.type) {
          case 'text-delta':
            if (chunk.text === '') break
            texts.push(chunk.text)
            if (!standsIn) this.session.append('assistant/chunk', { chunk: { type: 'text-delta', text: chunk.text } })
            break
          case 'tool-call':
            calls.push({ type: 'tool-call', id: chunk.id, name: chunk.name, arguments: chunk.arguments })
            break
          case 'usage':
            usage = { inputTokens: chunk.inputTokens, outputTokens: chunk.outputTokens }
            break
          case 'finish':
            finish = chunk.reason
            break
        }
      }
    } catch (error) {
      if (usage) this.#env.unrecorded?.(usage, provider)
      if (signal.aborted) return { end: aborted(signal) }
      return { end: { kind: 'error', message: `model stream failed: ${messageOf(error)}` } }
    }
    if ((signal.aborted || finish === undefined) && usage) this.#env.unrecorded?.(usage, provider)
    if (signal.aborted) return { end: aborted(signal) }
    // A stream that just stops may have been cut off: its text and calls cannot be trusted whole.
    if (finish === undefined) return { end: { kind: 'error', message: 'model stream failed: the stream ended without a finish chunk, so the answer may be cut off' } }

    const text = texts.join('')
    const textBlocks: ContentBlock[] = text ? [{ type: 'text', text }] : []
    // A cut-off or refused step never runs its calls (their arguments may be incomplete), so its
    // message keeps only its text.
    const cut = finish === 'max-tokens' || finish === 'refusal'
    const content = cut ? textBlocks : [...textBlocks, ...calls]
    this.session.append('assistant/message', usage ? { content, usage } : { content })
    if (finish === 'max-tokens') return { end: { kind: 'max-tokens' } }
    if (finish === 'refusal') return { end: { kind: 'blocked', message: 'the model refused the request' } }
    if (calls.length === 0) return { end: { kind: 'completed' } }
    return { calls }
  }

  /** Runs one step's calls; resolves true when a tool concluded the turn. */
  async #runTools(calls: ToolCallBlock[], signal: AbortSignal): Promise<boolean> {
    // Only a governed runner's child asks: no extra turn of the loop for the rest.
    if (this.#env.admitCalls) await this.#admitCalls(this.#env.admitCalls, signal)
    let concluded = false
    let closed = false
    const step: StepContext = { conclude: () => void (concluded = true) }
    const results: Array<ToolResultData | undefined> = new Array(calls.length)
    let appended = 0
    // A result becomes authoritative when it is recorded: observers (the structured-output
    // commit) see it then, and never once the step was cut short.
    const settle = (index: number, result: ToolResultData, execution?: ToolExecution, final?: ToolResult) => {
      if (closed) return
      results[index] = result
      if (execution && final) for (const observer of this.#observers) observer(execution, final, step)
      for (let next = results[appended]; next; next = results[appended]) {
        this.session.append('tool/result', next)
        appended++
      }
    }
    const stopped = abortPromise(signal)
    const running = new Set<Promise<void>>()
    const limit = this.#env.maxParallelToolCalls
    try {
      for (const [index, call] of calls.entries()) {
        // An exclusive call (e.g. structured_output) runs alone, so later calls see its effect.
        const exclusive = this.tools.resolve(call.name)?.concurrencySafe === false
        while (running.size > 0 && (exclusive || running.size >= limit) && !signal.aborted) {
          await Promise.race([exclusive ? Promise.all(running) : Promise.race(running), stopped.promise])
        }
        if (signal.aborted) break
        const task = this.#executeCall(call, signal, step).then(({ data, execution, result }) => settle(index, data, execution, result))
        running.add(task)
        task.then(
          () => running.delete(task),
          () => running.delete(task),
        )
        if (exclusive) await Promise.race([task, stopped.promise])
      }
      if (!signal.aborted) await Promise.race([Promise.all(running), stopped.promise])
    } finally {
      stopped.dispose()
    }
    if (signal.aborted) {
      for (const [index, call] of calls.entries()) {
        if (!results[index]) settle(index, { callId: call.id, name: call.name, ...errorResult('ABORTED', 'the tool call was cancelled') })
      }
      closed = true
    }
    return concluded
  }

  /** The environment's word on a step's calls (AgentEnvironment.admitCalls): a limit it names cancels the turn before any runs. */
  async #admitCalls(admitCalls: NonNullable<AgentEnvironment['admitCalls']>, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return
    try {
      const limit = await admitCalls(signal)
      if (limit) this.cancel(limit)
    } catch (error) {
      // A cancel ended the wait: the calls are recorded as any cancelled step's.
      if (!signal.aborted) throw error
    }
  }

  async #executeCall(call: ToolCallBlock, signal: AbortSignal, step: StepContext): Promise<{ data: ToolResultData; execution?: ToolExecution; result?: ToolResult }> {
    const base = { callId: call.id, name: call.name }
    const denial = this.tools.denial({ name: call.name, callId: call.id })
    // A guard's denial is final: no hook sees it, so none can turn it back into a success.
    if (denial !== undefined) return { data: { ...base, ...errorResult('DENIED', denial) } }

    const execution: ToolExecution = { agent: this.#view, callId: call.id, signal, concludeTurn: step.conclude }
    const { outcome, args } = await runModelCall(this.tools.resolve(call.name), call, execution, this.#env.delegated)
    let result: ToolResult = outcome.ok ? { isError: false, content: outcome.content, ...keepable(outcome.value) } : failure(outcome.error)
    const { afterTool } = this.#env.hooks
    if (afterTool) {
      try {
        result = checkHookResult(await afterTool({ id: call.id, name: call.name, arguments: args }, result))
      } catch (error) {
        result = errorResult('FAILED', `afterTool hook failed: ${messageOf(error)}`)
      }
    }
    return { data: { ...base, ...result }, execution, result }
  }

  /**
   * Why no model request may be made now: the agent's own tokens reached its budget (the host
   * stops it for its descendants' too), or the host says a limit above it is spent.
   */
  #refusal(): LimitReason | undefined {
    const budget = this.session.header.limits?.maxTotalTokens
    if (budget !== undefined) {
      const { events } = this.session
      for (; this.#counted < events.length; this.#counted++) {
        const { type, data } = events[this.#counted]!
        const usage = type === 'assistant/message' ? data.usage : undefined
        if (usage) this.#spent += usage.inputTokens + usage.outputTokens
      }
      if (this.#spent >= budget) return limitReason('maxTotalTokens', budget)
    }
    return this.#env.admit?.()
  }
}

export function toContent(message: string | ContentBlock[]): ContentBlock[] {
  if (typeof message === 'string') return [{ type: 'text', text: message }]
  if (Array.isArray(message) && message.every((block) => isContentBlock(block))) return message.map((block) => ({ ...block }))
  throw subagentError('ERR_SUBAGENT_ARGUMENT', 'a message must be a string or an array of content blocks ({ type: "text", text } or { type: "tool-call", ... })')
}

function errorResult(code: ToolErrorCode, text: string): ToolResult {
  return { isError: true, code, content: [{ type: 'text', text }] }
}

function failure(error: ToolError): ToolResult {
  return errorResult(error.code, error.message)
}

/** A hook's result is recorded and may cross a thread, so it must be plain, known data. */
function checkHookResult(result: ToolResult): ToolResult {
  if (typeof result !== 'object' || result === null || typeof result.isError !== 'boolean') {
    throw subagentError('ERR_SUBAGENT_HOOK_RESULT', 'it must return a tool result { isError, content, code?, value? }')
  }
  if (!Array.isArray(result.content) || !result.content.every((block) => isContentBlock(block))) {
    throw subagentError('ERR_SUBAGENT_HOOK_RESULT', 'its result content must be content blocks ({ type: "text", text })')
  }
  if (result.code !== undefined && !isToolErrorCode(result.code)) throw subagentError('ERR_SUBAGENT_HOOK_RESULT', `its result code ${JSON.stringify(result.code)} is not a tool error code`)
  if (!withinDepth(result.value)) throw subagentError('ERR_SUBAGENT_HOOK_RESULT', `its result value is nested deeper than ${MAX_VALUE_DEPTH} levels`)
  const checked: ToolResult = { isError: result.isError, content: result.content.map((block) => ({ ...block })) }
  if (result.code !== undefined) checked.code = result.code
  return { ...checked, ...keepable(result.value) }
}

/** A tool's value is recorded only when it is plain data (it must survive a thread boundary and a store). */
function keepable(value: unknown): { value?: unknown } {
  if (value === undefined) return {}
  const clone = tryClone(value)
  return clone ? { value: clone.value } : {}
}

function nextMacrotask(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve))
}

function aborted(signal: AbortSignal): TurnEndReason {
  return { kind: 'aborted', reason: signal.reason }
}

/** A promise that resolves when the signal aborts; dispose() drops its listener. */
function abortPromise(signal: AbortSignal): { promise: Promise<void>; dispose(): void } {
  let onAbort = () => {}
  const promise = new Promise<void>((resolve) => {
    onAbort = () => resolve()
    if (signal.aborted) resolve()
    else signal.addEventListener('abort', onAbort, { once: true })
  })
  return { promise, dispose: () => signal.removeEventListener('abort', onAbort) }
}
