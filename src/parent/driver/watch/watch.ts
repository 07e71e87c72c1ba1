/**
 * Everything that watches a child from the host's copy of its session (CONTRACT.md §12): the
 * readers of `run.events()`, the `subagent/event` listeners and the diagnostics channels. Fed by
 * the mirror, so it is the same on every transport.
 */
import type { AgentView } from '../../../agent/view.js'
import type { SessionEvent, SessionHeader } from '../../../protocol/shapes/session.js'
import { ChildDiagnostics, type ChildOutcomeInfo } from './diagnostics.js'
import { EventFeed, type EventsOptions } from './feed.js'
import type { Lifecycle, SubagentStartEvent } from '../lifecycle.js'

/** The host's copy of a child's session, fed by the transport; what `host.agents` shows. */
export interface Mirror extends AgentView {
  session: { header: SessionHeader; events: SessionEvent[] }
}

export interface WatchInit {
  mirror: Mirror
  lifecycle: Lifecycle
  /** The transport's name, as the diagnostics channels report it. */
  transport: string
  /** For a nested child: the parent's tool call that started it. */
  parentCallId?: string
}

type WatchState = { kind: 'unpublished' } | { kind: 'published'; started: SubagentStartEvent; diagnostics: ChildDiagnostics } | { kind: 'settled' }

export class ChildWatch {
  readonly #init: WatchInit
  readonly #feed: EventFeed
  #state: WatchState = { kind: 'unpublished' }

  constructor(init: WatchInit) {
    this.#init = init
    this.#feed = new EventFeed(init.mirror.session.events)
  }

  /** The mirror just appended `event`. */
  recorded(event: SessionEvent): void {
    this.#feed.appended()
    if (this.#state.kind !== 'published') return
    this.#offer(this.#state.started.runId, event)
    this.#state.diagnostics.recorded(event)
  }

  /** The host made a model request for the child: the step it belongs to is published now. */
  requested(): void {
    if (this.#state.kind === 'published') this.#state.diagnostics.requested()
  }

  /** Call right after `subagent/start`: listeners get what was recorded before, then each event live. */
  published(started: SubagentStartEvent): void {
    if (this.#state.kind !== 'unpublished') return
    const diagnostics = new ChildDiagnostics(() => this.#describe(started))
    this.#state = { kind: 'published', started, diagnostics }
    diagnostics.started()
    for (const event of this.#init.mirror.session.events) this.#offer(started.runId, event)
  }

  /** Call right after `subagent/end`: readers end after the last recorded event. */
  settled(ended: ChildOutcomeInfo): void {
    if (this.#state.kind === 'published') this.#state.diagnostics.ended(ended)
    this.#state = { kind: 'settled' }
    this.#feed.settle()
  }

  events(options?: EventsOptions): AsyncIterable<SessionEvent> {
    return this.#feed.read(options)
  }

  #offer(runId: string, event: SessionEvent): void {
    if (this.#init.lifecycle.listening('subagent/event')) this.#init.lifecycle.emit('subagent/event', { runId, id: this.#init.mirror.id, event })
  }

  #describe(started: SubagentStartEvent) {
    const { mirror, transport, parentCallId } = this.#init
    const { provider: modelProvider, model } = mirror.options
    return {
      runId: started.runId,
      id: started.id,
      parentId: started.parentId,
      depth: started.depth,
      ...(started.label === undefined ? {} : { label: started.label }),
      provider: started.provider,
      transport,
      ...(modelProvider === undefined ? {} : { modelProvider }),
      ...(model === undefined ? {} : { model }),
      ...(parentCallId === undefined ? {} : { parentCallId }),
    }
  }
}
