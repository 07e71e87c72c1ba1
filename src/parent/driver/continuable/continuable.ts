/**
 * A continuable child (CONTRACT.md §13): one session for its whole life, one activation (one
 * turn) per inbox message, in order, each ending in a settlement.
 *
 * Every activation runs on a child built for it: the first on the one the creation transaction
 * built, each later one rebuilt by the transport from the host's copy of the session (the seed
 * path a moved child takes, so its history, depth and limits come with it), on whatever runner
 * has room. When an activation ends the child leaves its runner, so an idle child holds no slot:
 * a runner that dies while it is idle loses nothing, and one that dies during an activation
 * settles that activation `error` (the host closes the turn), after which the child takes more
 * work as before.
 *
 *   active ──activation ends, inbox empty──▶ idle ──send──▶ building ──built──▶ active
 *     │    ──activation ends, a message waits──────────────▶ building
 *     └──────────── dispose (any phase) ──▶ disposed
 */
import { limitDiagnostic, type LimitReason } from '../../../agent/limit-stop.js'
import { addUsage } from '../../../agent/outcome.js'
import type { ChildSpec } from '../../../agent/child.js'
import { toContent } from '../../../agent/loop.js'
import { textOf, type ContentBlock } from '../../../protocol/shapes/content.js'
import type { SessionEvent, Usage } from '../../../protocol/shapes/session.js'
import { take, type Notice } from '../../../protocol/shapes/notice.js'
import { messageOf, subagentError } from '../../../protocol/errors.js'
import type { Budget } from '../budget.js'
import { cancelReason, closeTurn, type Cancel } from '../close-turn.js'
import type { ChildOutcomeInfo } from '../watch/diagnostics.js'
import type { Lifecycle, SubagentEndEvent, SubagentStartEvent } from '../lifecycle.js'
import { extractResult } from '../result.js'
import { SettlementLog } from './settlements.js'
import type { SessionWriter } from '../stores/store.js'
import type { ChildHandle, ChildMirror, ChildOutcome, ChildTransport } from '../../transport.js'
import type { ContinuableRun, Settlement, SubagentResult } from '../../types.js'
import type { ChildWatch, Mirror } from '../watch/watch.js'

export interface ContinuableInit {
  started: SubagentStartEvent
  /** The child the creation transaction built: the first activation runs on it. */
  handle: ChildHandle
  spec: ChildSpec
  mirror: Mirror
  /** What the transport feeds (the host's copy, the store, the budget, the watch). */
  childMirror: ChildMirror
  watch: ChildWatch
  writer: SessionWriter
  prompt: ContentBlock[]
  signal: AbortSignal
  budget: Budget
  /** A limit an ancestor had already spent when the child was published. */
  spent?: LimitReason
}

export interface ContinuableHooks {
  transport: ChildTransport
  lifecycle: Lifecycle
  /** Ends what the child started that only it could reach (see RunHooks). */
  endOrphansOf(id: string): Promise<void>
  /** Removes the child from `host.agents`, the host's budgets and its continuables. */
  retire(run: ContinuableChild): void
}

/** One activation's state while it runs. */
interface Activation {
  /** 1-based. */
  number: number
  message: ContentBlock[]
  /** Where its events begin in the session: its output is read from here. */
  from: number
  /** The host's cancel of it, once it made one (the first wins); `limit` when a limit was that cancel. */
  cancel?: Cancel
  limit?: LimitReason
  /** Settlement notices handed to its child: one its last step came too late for is the next activation's. */
  handed: Notice[]
}

type Phase =
  | { kind: 'building'; activation: Activation; abort: AbortController }
  | { kind: 'active'; activation: Activation; handle: ChildHandle }
  | { kind: 'idle' }
  | { kind: 'disposed' }

const DISPOSED_REASON = { kind: 'disposed' }

export class ContinuableChild implements ContinuableRun {
  readonly id: string
  readonly #init: ContinuableInit
  readonly #hooks: ContinuableHooks
  readonly #inbox: ContentBlock[][] = []
  readonly #log = new SettlementLog()
  #phase: Phase = { kind: 'idle' }
  #activations = 0
  /** The work loop while it runs: dispose waits for it. */
  #pumping: Promise<void> | undefined
  #disposal: Promise<void> | undefined
  #last: Settlement | undefined
  /** Its own usage over its life, every activation's summed: what its end reports (CONTRACT.md §12). */
  #usage: Usage | undefined
  /** Settlement notices for it as a parent that came while no activation ran: its next one takes them. */
  readonly #notices: Notice[] = []
  readonly #publishedAt = performance.now()
  /** The request's signal ends the child's life as dispose() does, its running activation cancelled with the caller's reason (CONTRACT.md §7). */
  readonly #onAbort = () => void (this.#disposal ??= this.#dispose(cancelReason(this.#init.signal)))

  /** Call right after publication and `subagent/start`: the prompt is the inbox's first message. */
  constructor(init: ContinuableInit, hooks: ContinuableHooks) {
    this.id = init.mirror.id
    this.#init = init
    this.#hooks = hooks
    this.#inbox.push(init.prompt)
    // After publication the request's signal ends the child's life, as dispose() does.
    if (init.signal.aborted) queueMicrotask(this.#onAbort)
    else init.signal.addEventListener('abort', this.#onAbort, { once: true })
    this.#pumping = this.#pump(init.handle)
  }

  get settlements(): AsyncIterable<Settlement> {
    return this.#log
  }

  send(message: string | ContentBlock[]): void {
    if (this.#phase.kind === 'disposed' || this.#disposal) {
      throw subagentError('ERR_SUBAGENT_DISPOSED', `subagent ${this.id} was disposed: start another continuable child to send it work`)
    }
    this.#inbox.push(toContent(message))
    this.#pumping ??= this.#pump(undefined)
  }

  dispose(): Promise<void> {
    return (this.#disposal ??= this.#dispose())
  }

  /**
   * A settlement notice for this child as a parent (CONTRACT.md §13): a running activation takes
   * it at its next step; an idle child keeps it for its next activation (it never starts one).
   */
  notify(notice: Notice): void {
    if (this.#phase.kind === 'active') this.#hand(this.#phase, notice)
    else if (this.#phase.kind !== 'disposed') this.#notices.push(notice)
  }

  #hand({ activation, handle }: { activation: Activation; handle: ChildHandle }, notice: Notice): void {
    activation.handed.push(notice)
    handle.notify(notice)
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.dispose()
  }

  /** Takes the inbox's messages one activation each, in order, until it is empty (or the child is disposed). */
  async #pump(built: ChildHandle | undefined): Promise<void> {
    let handle = built
    try {
      for (let message = this.#inbox.shift(); message && !this.#disposal; message = this.#inbox.shift()) {
        const activation: Activation = { number: ++this.#activations, message, from: this.#init.mirror.session.events.length, handed: [] }
        const settlement = await this.#activate(activation, handle)
        handle = undefined
        this.#settle(settlement)
      }
    } finally {
      // The first child, when dispose came before its activation began.
      if (handle) await handle.release().catch(() => {})
      if (this.#phase.kind !== 'disposed') this.#phase = { kind: 'idle' }
      this.#pumping = undefined
    }
  }

  /** One activation: a child built for it (unless given), its turn, its settlement; the child then leaves its runner. */
  async #activate(activation: Activation, given: ChildHandle | undefined): Promise<Settlement> {
    const refused = this.#init.spent ?? this.#init.budget.refusal()
    if (refused) {
      await given?.release().catch(() => {})
      return this.#settlementOf(activation, { output: [], stopReason: 'aborted', diagnostic: limitDiagnostic(refused) })
    }
    let handle = given
    if (!handle) {
      const abort = new AbortController()
      this.#phase = { kind: 'building', activation, abort }
      try {
        handle = await this.#hooks.transport.create(this.#respec(), this.#init.childMirror, abort.signal)
      } catch (error) {
        // Cancelled while it was built (disposed, the host closing): what ended the wait is the cancel, not a failure to build.
        if (activation.cancel) return this.#settlementOf(activation, { output: [], stopReason: 'aborted' })
        return this.#settlementOf(activation, { output: [], stopReason: 'error', diagnostic: `the child could not be rebuilt for its next activation: ${messageOf(error)}` })
      }
      // A budget above it may have been spent while it waited for a runner (a descendant's spending, a deadline).
      const spent = activation.cancel ? undefined : this.#init.budget.refusal()
      if (activation.cancel || spent) {
        await handle.rollback().catch(() => {})
        return this.#settlementOf(activation, spent ? { output: [], stopReason: 'aborted', diagnostic: limitDiagnostic(spent) } : { output: [], stopReason: 'aborted' })
      }
    }
    const active = { kind: 'active', activation, handle } as const
    this.#phase = active
    const { budget } = this.#init
    budget.begin({ stop: (reason) => this.#limitStop(activation, handle, reason) })
    try {
      // Into the inbox before the activation begins: its first step takes them, behind its message.
      for (const notice of this.#notices.splice(0)) this.#hand(active, notice)
      return this.#settlementOf(activation, this.#resultOf(activation, await handle.run(activation.message)))
    } catch (error) {
      return this.#settlementOf(activation, { output: [], stopReason: 'error', diagnostic: `the activation failed: ${messageOf(error)}` })
    } finally {
      budget.pause()
      // It takes no more steps: a notice from now on waits for the next activation, with those it never took.
      if (this.#phase === active) this.#phase = { kind: 'idle' }
      this.#notices.unshift(...untaken(activation, this.#init.mirror.session.events))
      // Idle holds no runner: the child leaves it now, and is rebuilt for its next message.
      await handle.release().catch(() => {})
    }
  }

  /** The spec a later activation is built from: the host's copy of the session is its seed (fork seed, depth, limits in the header). */
  #respec(): ChildSpec {
    return { ...this.#init.spec, seed: [...this.#init.mirror.session.events] }
  }

  #resultOf(activation: Activation, outcome: ChildOutcome): SubagentResult {
    const { mirror, childMirror, spec } = this.#init
    if (outcome.fault) closeTurn(mirror.session.events, activation.from, outcome.fault, activation.cancel, (event: SessionEvent) => childMirror.append(event))
    const maxTokens = spec.options.maxTokens
    const result = extractResult(mirror.session.events, outcome, {
      seedLength: activation.from,
      cancelled: activation.cancel !== undefined,
      structuredRequested: false,
      ...(maxTokens === undefined ? {} : { maxTokens }),
    })
    if (activation.limit && result.stopReason !== 'completed') {
      result.stopReason = 'aborted'
      result.diagnostic = limitDiagnostic(activation.limit)
    }
    return result
  }

  #limitStop(activation: Activation, handle: ChildHandle, reason: LimitReason): void {
    if (activation.cancel) return
    activation.cancel = { reason }
    activation.limit = reason
    handle.cancel(reason)
  }

  #settlementOf(activation: Activation, { output, stopReason, diagnostic, usage }: SubagentResult): Settlement {
    const { runId, id, parentId } = this.#init.started
    const settlement: Settlement = { runId, id, parentId, activation: activation.number, stopReason, output }
    const text = textOf(output)
    if (text) settlement.lastAssistantMessage = text
    if (diagnostic !== undefined && stopReason !== 'completed') settlement.diagnostic = diagnostic
    if (usage) settlement.usage = usage
    return settlement
  }

  #settle(settlement: Settlement): void {
    this.#last = settlement
    if (settlement.usage) this.#usage = addUsage(this.#usage, settlement.usage)
    this.#log.push(settlement)
    this.#hooks.lifecycle.emit('subagent/settled', settlement)
  }

  async #dispose(reason: unknown = DISPOSED_REASON): Promise<void> {
    const phase = this.#phase
    this.#init.signal.removeEventListener('abort', this.#onAbort)
    this.#inbox.length = 0
    if (phase.kind === 'active') {
      phase.activation.cancel ??= { reason }
      phase.handle.cancel(reason)
    } else if (phase.kind === 'building') {
      phase.activation.cancel ??= { reason }
      phase.abort.abort(reason)
    }
    await this.#pumping
    this.#phase = { kind: 'disposed' }
    try {
      await this.#hooks.endOrphansOf(this.id)
    } finally {
      this.#init.budget.end()
      this.#hooks.retire(this)
      this.#ended()
    }
    await this.#init.writer.close()
  }

  /** Its life is over: `subagent/end` (its last activation's outcome, its life's usage) and the watch's readers end. */
  #ended(): void {
    const last = this.#last
    const outcome: ChildOutcomeInfo = { stopReason: last?.stopReason ?? 'aborted' }
    if (this.#usage) outcome.usage = this.#usage
    const totalUsage = this.#init.budget.totalUsage()
    if (totalUsage) outcome.totalUsage = totalUsage
    if (last?.diagnostic !== undefined) outcome.diagnostic = last.diagnostic
    if (this.#hooks.lifecycle.listening('subagent/end')) {
      const end: SubagentEndEvent = Object.assign({ durationMs: performance.now() - this.#publishedAt }, this.#init.started, outcome)
      if (last?.lastAssistantMessage) end.lastAssistantMessage = last.lastAssistantMessage
      this.#hooks.lifecycle.emit('subagent/end', end)
    }
    this.#init.watch.settled(outcome)
    this.#log.end()
  }
}

/** The notices handed to an activation that its steps never took: none of its `user/message` events has their source. */
function untaken(activation: Activation, events: readonly SessionEvent[]): Notice[] {
  const left = [...activation.handed]
  for (let i = activation.from; i < events.length && left.length > 0; i++) {
    const event = events[i]!
    if (event.type === 'user/message') take(left, event.data.source)
  }
  return left
}
