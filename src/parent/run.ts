/**
 * A published delegation: drives the child's one turn, turns the parent's abort into a cancel,
 * extracts the result, and tears the child down on dispose (CONTRACT.md §2).
 */
import type { AgentOptions, AgentView } from '../agent/view.js'
import { textOf, type ContentBlock } from '../protocol/content.js'
import type { SessionEvent, SessionHeader, TurnEndReason } from '../protocol/session.js'
import type { Lifecycle, SubagentStartEvent } from './lifecycle.js'
import { diagnosticText, extractResult, type ChildOutcome } from './result.js'
import type { EventsOptions } from './feed.js'
import type { SessionWriter } from './store.js'
import type { ChildHandle } from './transport.js'
import type { SubagentResult, SubagentRun } from './types.js'
import type { ChildWatch } from './watch.js'

/** The host's copy of a child's session, fed by the transport; what `host.agents` shows. */
export interface Mirror extends AgentView {
  session: { header: SessionHeader; events: SessionEvent[] }
}

export interface RunHooks {
  lifecycle: Lifecycle
  /** Stops the background jobs the child started: nobody could collect them once it is gone. */
  endJobsOf(id: string): Promise<void>
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
}

export class DelegationRun implements SubagentRun {
  readonly id: string
  readonly result: Promise<SubagentResult>
  readonly #init: RunInit
  readonly #hooks: RunHooks
  #cancelled = false
  #disposal: Promise<void> | undefined
  readonly #publishedAt = performance.now()
  readonly #onAbort = () => {
    this.#cancelled = true
    this.#init.handle.cancel(cancelReason(this.#init.signal))
  }

  /** Call right after publication and the `subagent/start` event. */
  constructor(init: RunInit, hooks: RunHooks) {
    this.#init = init
    this.#hooks = hooks
    this.id = init.mirror.id
    const { signal } = init
    // The hand-off gap: an abort that landed after publication, before this listener existed,
    // must not reject start(); the child never runs and the run reports `aborted`.
    if (signal.aborted) {
      this.#cancelled = true
      this.result = Promise.resolve({ output: [], stopReason: 'aborted' })
    } else {
      signal.addEventListener('abort', this.#onAbort, { once: true })
      this.result = this.#drive()
    }
    this.result.then(
      (result) => this.#ended(result),
      (error: unknown) => this.#ended({ output: [], stopReason: 'error', diagnostic: `the run failed: ${error instanceof Error ? error.message : String(error)}` }),
    )
  }

  dispose(): Promise<void> {
    return (this.#disposal ??= this.#dispose())
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.dispose()
  }

  /** The child's events from the host's copy, recorded then live, until the run has settled (§12). */
  events(options?: EventsOptions): AsyncIterable<SessionEvent> {
    return this.#init.watch.events(options)
  }

  async #drive(): Promise<SubagentResult> {
    const { handle, mirror, prompt, seedLength, structuredRequested, options } = this.#init
    try {
      const outcome = await handle.run(prompt)
      if (outcome.fault) this.#closeTurn(outcome.fault)
      return extractResult(mirror.session.events, outcome, {
        seedLength,
        cancelled: this.#cancelled,
        structuredRequested,
        ...(options.maxTokens === undefined ? {} : { maxTokens: options.maxTokens }),
      })
    } finally {
      this.#init.signal.removeEventListener('abort', this.#onAbort)
    }
  }

  /**
   * A child whose runner died (crashed, or terminated after the grace) never recorded the end of
   * its turn: the host records it, with the diagnostic, so the transcript on disk says what the
   * result says.
   */
  #closeTurn(fault: NonNullable<ChildOutcome['fault']>): void {
    const { events } = this.#init.mirror.session
    let turn = events.length - 1
    while (turn >= this.#init.seedLength && events[turn]!.type !== 'turn/start' && events[turn]!.type !== 'turn/end') turn--
    if (turn < this.#init.seedLength || events[turn]!.type !== 'turn/start') return
    const diagnostic = diagnosticText(fault.diagnostic)
    const reason: TurnEndReason = fault.stopReason === 'aborted' ? { kind: 'aborted', reason: { kind: 'terminated', diagnostic } } : { kind: 'error', message: diagnostic }
    this.#init.record({ seq: events.length, type: 'turn/end', data: { reason } })
  }

  #ended({ output, stopReason, usage, diagnostic }: SubagentResult): void {
    const text = textOf(output)
    this.#hooks.lifecycle.emit('subagent/end', {
      ...this.#init.started,
      stopReason,
      ...(text ? { lastAssistantMessage: text } : {}),
      durationMs: performance.now() - this.#publishedAt,
      ...(usage ? { usage } : {}),
      ...(diagnostic !== undefined && stopReason !== 'completed' ? { diagnostic } : {}),
    })
    this.#init.watch.settled({ stopReason, ...(usage ? { usage } : {}), ...(diagnostic !== undefined && stopReason !== 'completed' ? { diagnostic } : {}) })
  }

  async #dispose(): Promise<void> {
    const { signal, handle } = this.#init
    signal.removeEventListener('abort', this.#onAbort)
    this.#cancelled = true
    handle.cancel({ kind: 'disposed' })
    // The result's fault stays on `result`; dispose reports only a failed release, after both settled.
    const [, teardown] = await Promise.allSettled([this.result, this.#teardown()])
    if (teardown.status === 'rejected') throw teardown.reason
  }

  async #teardown(): Promise<void> {
    await this.result.catch(() => {})
    await this.#hooks.endJobsOf(this.id)
    try {
      await this.#init.handle.release()
    } catch (error) {
      throw new Error(`releasing subagent ${this.id} failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error })
    } finally {
      this.#hooks.retire(this)
    }
    await this.#init.writer.close()
  }
}

/**
 * The reason a parent's abort cancels its child with: the caller's own, unchanged, when it gave
 * one; `{ kind: 'parent' }` for a plain `abort()` (whose reason is the default AbortError).
 */
function cancelReason(signal: AbortSignal): unknown {
  const { reason } = signal
  return reason instanceof DOMException && reason.name === 'AbortError' ? { kind: 'parent' } : reason
}
