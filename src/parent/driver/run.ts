/**
 * A published delegation: drives the child's one turn, turns the parent's abort into a cancel,
 * extracts the result, and tears the child down on dispose (CONTRACT.md §2).
 */
import type { AgentOptions } from '../../agent/view.js'
import { textOf, type ContentBlock } from '../../protocol/shapes/content.js'
import type { SessionEvent } from '../../protocol/shapes/session.js'
import { limitDiagnostic, type LimitReason } from '../../agent/limit-stop.js'
import type { Budget } from './budget.js'
import type { ChildOutcomeInfo } from './watch/diagnostics.js'
import type { Lifecycle, SubagentEndEvent, SubagentStartEvent } from './lifecycle.js'
import { extractResult } from './result.js'
import { cancelReason, closeTurn, type Cancel } from './close-turn.js'
import type { EventsOptions } from './watch/feed.js'
import type { SessionWriter } from './stores/store.js'
import type { ChildHandle } from '../transport.js'
import type { Notice } from '../../protocol/shapes/notice.js'
import type { SubagentResult, SubagentRun } from '../types.js'
import type { ChildWatch, Mirror } from './watch/watch.js'
import { messageOf, subagentError } from '../../protocol/errors.js'

export interface RunHooks {
  lifecycle: Lifecycle
  /** Ends what the child started that only it could reach (its background jobs, its continuable children): nobody could once it is gone. */
  endOrphansOf(id: string): Promise<void>
  /** Removes the child from `host.agents` and stops tracking the run. */
  retire(run: DelegationRun): void
}

export interface RunInit {
  /** What `subagent/start` said of the run; `subagent/end` repeats it. */
  started: SubagentStartEvent
  handle: ChildHandle
  mirror: Mirror
  /** The mirror's readers and listeners: told when the run has settled. */
  watch: ChildWatch
  /** Appends an event to the child's record (the mirror and the store), as if the child had. */
  record(event: SessionEvent): void
  writer: SessionWriter
  prompt: ContentBlock[]
  signal: AbortSignal
  structuredRequested: boolean
  seedLength: number
  options: AgentOptions
  /** The child's node in the host's budget tree: its deadline, steps and tokens (CONTRACT.md §11). */
  budget: Budget
  /** A limit an ancestor had already spent when the child's limits were worked out: it never runs. */
  spent?: LimitReason
}

export class DelegationRun implements SubagentRun {
  readonly id: string
  readonly result: Promise<SubagentResult>
  readonly #init: RunInit
  readonly #hooks: RunHooks
  /** The host's cancel of the child, once it made one (the first wins, as in the child's turn). */
  #cancel: Cancel | undefined
  /** The limit the host stopped the child for, when that was the cancel. */
  #limit: LimitReason | undefined
  #disposal: Promise<void> | undefined
  readonly #publishedAt = performance.now()
  readonly #onAbort = () => this.#cancelWith(cancelReason(this.#init.signal))

  /** Call right after publication and the `subagent/start` event. */
  constructor(init: RunInit, hooks: RunHooks) {
    this.#init = init
    this.#hooks = hooks
    this.id = init.mirror.id
    const { signal } = init
    // The hand-off gap: an abort that landed after publication, before this listener existed,
    // must not reject start(); the child never runs and the run reports `aborted`. So does a child
    // whose ancestors' budget was spent, before its limits were worked out or while it was being
    // built (its budget node was marked then, with no owner to stop, and is never marked again).
    const spent = init.spent ?? init.budget.refusal()
    if (signal.aborted || spent) {
      this.#limit = signal.aborted ? undefined : spent
      this.#cancel = { reason: this.#limit ?? cancelReason(signal) }
      this.result = Promise.resolve(this.#limit ? { output: [], stopReason: 'aborted', diagnostic: limitDiagnostic(this.#limit) } : { output: [], stopReason: 'aborted' })
    } else {
      signal.addEventListener('abort', this.#onAbort, { once: true })
      init.budget.begin({ stop: (reason) => this.#limitStop(reason) })
      this.result = this.#drive()
    }
    // Its node stays in the tree until teardown: what it started may outlive its turn (#teardown).
    this.result.finally(() => init.budget.settle()).catch(() => {})
    this.result.then(
      (result) => this.#ended(result),
      (error: unknown) => this.#ended(this.#withTotal({ output: [], stopReason: 'error', diagnostic: `the run failed: ${messageOf(error)}` })),
    )
  }

  dispose(): Promise<void> {
    return (this.#disposal ??= this.#dispose())
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.dispose()
  }

  /** A settlement notice for the child as a parent of continuable children (CONTRACT.md §13): its running turn takes it. */
  notify(notice: Notice): void {
    this.#init.handle.notify(notice)
  }

  /** The child's events from the host's copy, recorded then live, until the run has settled (§12). */
  events(options?: EventsOptions): AsyncIterable<SessionEvent> {
    return this.#init.watch.events(options)
  }

  async #drive(): Promise<SubagentResult> {
    const { handle, mirror, prompt, seedLength, structuredRequested, options } = this.#init
    try {
      const outcome = await handle.run(prompt)
      if (outcome.fault) closeTurn(mirror.session.events, seedLength, outcome.fault, this.#cancel, this.#init.record)
      const result = extractResult(mirror.session.events, outcome, {
        seedLength,
        cancelled: this.#cancel !== undefined,
        structuredRequested,
        ...(options.maxTokens === undefined ? {} : { maxTokens: options.maxTokens }),
      })
      // The host's own account of a limit stop, whatever the child recorded (or failed to, if its runner was stopped).
      if (this.#limit && result.stopReason !== 'completed') {
        result.stopReason = 'aborted'
        result.diagnostic = limitDiagnostic(this.#limit)
      }
      return this.#withTotal(result)
    } finally {
      this.#init.signal.removeEventListener('abort', this.#onAbort)
    }
  }

  /**
   * The result (a fresh object) given the tree's usage (its budget node): what each session in the
   * tree recorded, as the host mirrored it, never what the child's runner claims of its descendants.
   */
  #withTotal(result: SubagentResult): SubagentResult {
    const totalUsage = this.#init.budget.totalUsage()
    if (totalUsage) result.totalUsage = totalUsage
    return result
  }

  /** A limit was reached: the child is cancelled with its reason, through the ordinary path (grace, then stop). */
  #limitStop(reason: LimitReason): void {
    if (this.#cancelWith(reason)) this.#limit = reason
  }

  /** Cancels the child with `reason` unless it was cancelled already; whether it was this cancel. */
  #cancelWith(reason: unknown): boolean {
    if (this.#cancel) return false
    this.#cancel = { reason }
    this.#init.handle.cancel(reason)
    return true
  }

  #ended({ output, stopReason, usage, totalUsage, diagnostic }: SubagentResult): void {
    // Assigned, never `{ ...object, more }`: on Node 20 that copy costs about 10 µs (see diagnostics.ts).
    const outcome: ChildOutcomeInfo = { stopReason }
    if (usage) outcome.usage = usage
    if (totalUsage) outcome.totalUsage = totalUsage
    if (diagnostic !== undefined && stopReason !== 'completed') outcome.diagnostic = diagnostic
    if (this.#hooks.lifecycle.listening('subagent/end')) {
      const end: SubagentEndEvent = Object.assign({ durationMs: performance.now() - this.#publishedAt }, this.#init.started, outcome)
      const text = textOf(output)
      if (text) end.lastAssistantMessage = text
      const moves = this.#moves()
      if (moves > 0) end.moves = moves
      this.#hooks.lifecycle.emit('subagent/end', end)
    }
    this.#init.watch.settled(outcome)
  }

  /** How many times the child was rebuilt on another runner: its `child/moved` events. */
  #moves(): number {
    const { events } = this.#init.mirror.session
    let moves = 0
    for (let i = this.#init.seedLength; i < events.length; i++) if (events[i]!.type === 'child/moved') moves++
    return moves
  }

  async #dispose(): Promise<void> {
    const { signal, handle } = this.#init
    signal.removeEventListener('abort', this.#onAbort)
    // The handle is told whatever came before (it keeps its first cancel, as the record does).
    const disposed = { kind: 'disposed' }
    this.#cancel ??= { reason: disposed }
    handle.cancel(disposed)
    // The result's fault stays on `result`; dispose reports only a failed release, after both settled.
    const [, teardown] = await Promise.allSettled([this.result, this.#teardown()])
    if (teardown.status === 'rejected') throw teardown.reason
  }

  async #teardown(): Promise<void> {
    await this.result.catch(() => {})
    try {
      await this.#hooks.endOrphansOf(this.id)
    } finally {
      // Until its background jobs and continuable children ended, a limit spent above reached them through its node.
      this.#init.budget.end()
    }
    try {
      await this.#init.handle.release()
    } catch (error) {
      throw subagentError('ERR_SUBAGENT_RELEASE', `releasing subagent ${this.id} failed: ${messageOf(error)}`, { cause: error })
    } finally {
      this.#hooks.retire(this)
    }
    await this.#init.writer.close()
  }
}
