/**
 * `node:diagnostics_channel` publication (CONTRACT.md §12). Channels are per thread, and a
 * child's loop may run in another thread, process or node, so the host publishes from its own
 * copy of each child's session: whatever the transport, an APM in the host's thread sees every
 * child. Nothing is built while a channel has no subscriber.
 *
 * What the mirror shows, and the model requests the host makes, decide what a step and a tool call are:
 * - a step (one model request) starts at the child's `turn/start`, or at the `tool/result` that
 *   completes the previous step's calls, and ends at the `assistant/message` it produced: one with
 *   tool calls at once, one without at the `turn/end` it led to, whose reason says how the model
 *   finished (`max-tokens`; `blocked`, a refusal; else `stop`). A step is published once its
 *   request is seen made (`requested`: the host made it, or a runner says its module model's
 *   request recorded nothing before the turn ended), or at its first chunk or message. One the
 *   turn ended before any of those was never made (a limit or a cancel stopped the loop first,
 *   no model was registered). A
 *   `child/moved` ends the step it interrupts (`error: 'moved'`): the request is made again on
 *   the new runner, as a step of its own.
 * - a tool call starts at the `assistant/message` that announced it and ends at its `tool/result`.
 *   Calls of one step may share an id, and each is a run with its own result: a result ends the
 *   oldest open call of its id, so every start has one end, with its own arguments and times.
 * Times are when the host recorded those events (epoch ms).
 */
import { channel } from 'node:diagnostics_channel'
import type { ContentBlock } from '../../../protocol/shapes/content.js'
import type { SessionEvent, TurnEndReason, Usage } from '../../../protocol/shapes/session.js'
import type { SubagentEndEvent } from '../lifecycle.js'

export const CHANNEL_NAMES = {
  childStart: 'subagent-worker:child:start',
  childEnd: 'subagent-worker:child:end',
  step: 'subagent-worker:step',
  tool: 'subagent-worker:tool',
} as const

const channels = {
  childStart: channel(CHANNEL_NAMES.childStart),
  childEnd: channel(CHANNEL_NAMES.childEnd),
  step: channel(CHANNEL_NAMES.step),
  tool: channel(CHANNEL_NAMES.tool),
}

/** What `subagent/end` says of how the run ended: what `child:end` repeats. */
export type ChildOutcomeInfo = Pick<SubagentEndEvent, 'stopReason' | 'usage' | 'totalUsage' | 'diagnostic'>

/** What every message says of its child. */
export interface ChildInfo {
  runId: string
  /** The child's session id. */
  id: string
  parentId: string
  depth: number
  label?: string
  /** The provider that started it: 'spawn' or 'fork'. */
  provider: string
  /** Where it runs: 'inline', 'worker', 'process', or a transport's name (e.g. 'bullmq'). */
  transport: string
  /** The child's model, by its registered name and its model id, when it has one. */
  modelProvider?: string
  model?: string
  /** For a nested child: the id of the parent's tool call that started it. */
  parentCallId?: string
}

export interface ChildStartMessage extends ChildInfo {
  startTime: number
}

export interface ChildEndMessage extends ChildInfo {
  startTime: number
  endTime: number
  stopReason: SubagentEndEvent['stopReason']
  usage?: Usage
  /** Own usage plus every descendant's, as `subagent/end` has it. */
  totalUsage?: Usage
  diagnostic?: string
}

export interface StepMessage extends ChildInfo {
  phase: 'start' | 'end'
  /** 1-based, counted over the child's life. */
  step: number
  startTime: number
  /** On 'end' only, as are the fields after it. */
  endTime?: number
  usage?: Usage
  /** How the model finished (a stream's `finish` reasons). */
  finishReason?: 'stop' | 'tool-calls' | 'max-tokens' | 'refusal'
  /** Why the step ended without a message: the turn's end ('error', 'aborted') or the run's stop reason. */
  error?: string
  /** The assistant message the step produced (the host's copy: do not change it). */
  output?: ContentBlock[]
}

export interface ToolMessage extends ChildInfo {
  phase: 'start' | 'end'
  callId: string
  name: string
  /** The arguments as the model wrote them (JSON text). */
  arguments: string
  startTime: number
  /** On 'end' only, as are the fields after it. */
  endTime?: number
  isError?: boolean
  code?: string
  /** Why the call ended without a result: the turn's end or the run's stop reason. */
  error?: string
  result?: ContentBlock[]
}

interface OpenCall {
  callId: string
  name: string
  arguments: string
  startTime: number
}

/** Where the child is between events, as far as steps and tool calls go. */
type StepState =
  /** No turn running, or the start of what runs is unknown (subscribed mid-step). */
  | { kind: 'idle' }
  /** A model request is running since `startTime`; `announced` once its start was published. */
  | { kind: 'step'; startTime: number; announced: boolean }
  /** The step's message came at `endTime`, without tool calls: its turn's end says how it finished. */
  | { kind: 'answered'; startTime: number; endTime: number; content: ContentBlock[]; usage: Usage | undefined }
  /** The last message's tool calls are running, in the order announced (ids may repeat). */
  | { kind: 'tools'; calls: OpenCall[] }

/** Shared: resetting to idle on every event of an unwatched child allocates nothing. */
const IDLE: StepState = { kind: 'idle' }

/** A child's publication: `child:start`, `child:end`, and its steps and tool calls from the mirror. */
export class ChildDiagnostics {
  readonly #describe: () => ChildInfo
  #info: ChildInfo | undefined
  #state: StepState = IDLE
  #steps = 0
  #startTime = 0

  /** `describe` is called once, when something is first published. */
  constructor(describe: () => ChildInfo) {
    this.#describe = describe
  }


  started(): void {
    this.#startTime = Date.now()
    if (channels.childStart.hasSubscribers) channels.childStart.publish(this.#with({ startTime: this.#startTime }) satisfies ChildStartMessage)
  }

  recorded(event: SessionEvent): void {
    if (!channels.step.hasSubscribers && !channels.tool.hasSubscribers) {
      this.#state = IDLE
      return
    }
    const now = Date.now()
    switch (event.type) {
      case 'turn/start':
        this.#state = { kind: 'step', startTime: now, announced: false }
        break
      case 'assistant/chunk':
        this.#announce()
        break
      case 'assistant/message':
        this.#message(event.data.content, event.data.usage, now)
        break
      case 'tool/result':
        this.#result(event.data.callId, event.data.isError, event.data.code, event.data.content, now)
        break
      case 'child/moved':
        this.#moved(now)
        break
      case 'turn/end':
        this.#interrupt(turnError(event.data.reason), now, finishOf(event.data.reason))
        this.#state = IDLE
        break
    }
  }

  /** The running step's model request was made (the host made it, or its runner says so): it is published now. */
  requested(): void {
    // Without a subscriber the state is idle (see recorded), and nothing is announced.
    this.#announce()
  }

  ended(ended: ChildOutcomeInfo): void {
    const now = Date.now()
    // A run that settled without a turn/end (the hand-off gap) leaves nothing open.
    if (channels.step.hasSubscribers || channels.tool.hasSubscribers) this.#interrupt(ended.stopReason === 'completed' ? undefined : ended.stopReason, now)
    this.#state = IDLE
    if (!channels.childEnd.hasSubscribers) return
    const { stopReason, usage, totalUsage, diagnostic } = ended
    const message: ChildEndMessage = this.#with({ startTime: this.#startTime, endTime: now, stopReason })
    if (usage) message.usage = usage
    if (totalUsage) message.totalUsage = totalUsage
    if (diagnostic !== undefined) message.diagnostic = diagnostic
    channels.childEnd.publish(message)
  }

  #child(): ChildInfo {
    return (this.#info ??= this.#describe())
  }

  /**
   * A message: its own fields, then the child's copied in. Not `{ ...child, ...fields }`: on
   * Node 20 a spread followed by more properties takes about 10 µs an object (the copy's shape
   * leaves V8's fast path), which was most of what a subscriber cost a child (bench row O3).
   */
  #with<const T extends object>(fields: T): T & ChildInfo {
    return Object.assign(fields, this.#child())
  }

  /** The running step produced its first output: its request was made, so it is published. */
  #announce(): void {
    const state = this.#state
    if (state.kind !== 'step' || state.announced) return
    state.announced = true
    this.#steps++
    if (channels.step.hasSubscribers) channels.step.publish(this.#with({ phase: 'start', step: this.#steps, startTime: state.startTime }) satisfies StepMessage)
  }

  #message(content: ContentBlock[], usage: Usage | undefined, now: number): void {
    const state = this.#state
    const calls = content.some((block) => block.type === 'tool-call')
    if (state.kind === 'step') this.#announce()
    if (!calls) {
      // Its turn ends next, and says how the model finished.
      this.#state = state.kind === 'step' ? { kind: 'answered', startTime: state.startTime, endTime: now, content, usage } : IDLE
      return
    }
    if (state.kind === 'step') this.#endStep(state.startTime, now, 'tool-calls', content, usage)
    const open: OpenCall[] = []
    for (const call of content) {
      if (call.type !== 'tool-call') continue
      open.push({ callId: call.id, name: call.name, arguments: call.arguments, startTime: now })
      if (channels.tool.hasSubscribers) {
        channels.tool.publish(this.#with({ phase: 'start', callId: call.id, name: call.name, arguments: call.arguments, startTime: now }) satisfies ToolMessage)
      }
    }
    this.#state = { kind: 'tools', calls: open }
  }

  #result(callId: string, isError: boolean, code: string | undefined, result: ContentBlock[], now: number): void {
    const state = this.#state
    if (state.kind !== 'tools') return
    // The oldest open call of that id: a step's calls may share one.
    const index = state.calls.findIndex((call) => call.callId === callId)
    if (index === -1) return
    const [call] = state.calls.splice(index, 1)
    this.#endCall(call!, now, code === undefined ? { isError, result } : { isError, code, result })
    // The step's calls are all answered: the loop's next model request starts now.
    if (state.calls.length === 0) this.#state = { kind: 'step', startTime: now, announced: false }
  }

  #endStep(startTime: number, endTime: number, finishReason: NonNullable<StepMessage['finishReason']>, output: ContentBlock[], usage: Usage | undefined): void {
    if (!channels.step.hasSubscribers) return
    const message: StepMessage = this.#with({ phase: 'end', step: this.#steps, startTime, endTime, finishReason, output })
    if (usage) message.usage = usage
    channels.step.publish(message)
  }

  /** The running step ends without a message: `error` says why. */
  #failStep(startTime: number, endTime: number, error: string): void {
    if (channels.step.hasSubscribers) channels.step.publish(this.#with({ phase: 'end', step: this.#steps, startTime, endTime, error }) satisfies StepMessage)
  }

  /** The child left a runner that went: a request it was waiting on ends here and is made again, a new step. */
  #moved(now: number): void {
    const state = this.#state
    if (state.kind !== 'step') return
    if (state.announced) this.#failStep(state.startTime, now, 'moved')
    this.#state = { kind: 'step', startTime: now, announced: false }
  }

  /**
   * The turn or the run ended: a step's message waiting for it ends with how the model finished;
   * what is still open ends with `error` (a step only if its request was seen made).
   */
  #interrupt(error: string | undefined, now: number, finish: NonNullable<StepMessage['finishReason']> = 'stop'): void {
    const state = this.#state
    if (state.kind === 'answered') {
      this.#endStep(state.startTime, state.endTime, finish, state.content, state.usage)
    } else if (state.kind === 'tools') {
      for (const call of state.calls) this.#endCall(call, now, { error: error ?? 'unanswered' })
    } else if (state.kind === 'step' && state.announced && error !== undefined) {
      this.#failStep(state.startTime, now, error)
    }
  }

  #endCall(call: OpenCall, now: number, outcome: Pick<ToolMessage, 'isError' | 'code' | 'error' | 'result'>): void {
    if (!channels.tool.hasSubscribers) return
    channels.tool.publish(this.#with(Object.assign({ phase: 'end', callId: call.callId, name: call.name, arguments: call.arguments, startTime: call.startTime, endTime: now } as const, outcome)) satisfies ToolMessage)
  }
}

/** What a turn's end says went wrong, if anything. */
function turnError(reason: TurnEndReason): string | undefined {
  return reason.kind === 'completed' ? undefined : reason.kind
}

/** How the model finished the step whose message ended the turn: cut off, refused, or done. */
function finishOf(reason: TurnEndReason): NonNullable<StepMessage['finishReason']> {
  return reason.kind === 'max-tokens' ? 'max-tokens' : reason.kind === 'blocked' ? 'refusal' : 'stop'
}
