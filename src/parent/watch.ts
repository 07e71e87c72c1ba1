/**
 * Everything that watches a child from the host's copy of its session (CONTRACT.md §12): the
 * readers of `run.events()` and the `subagent/event` listeners. Fed by the mirror, so it is the
 * same on every transport.
 */
import type { SessionEvent } from '../protocol/session.js'
import { EventFeed, type EventsOptions } from './feed.js'
import type { Lifecycle, SubagentStartEvent } from './lifecycle.js'

type WatchState = { kind: 'unpublished' } | { kind: 'published'; runId: string } | { kind: 'settled' }

export class ChildWatch {
  readonly #id: string
  readonly #events: readonly SessionEvent[]
  readonly #lifecycle: Lifecycle
  readonly #feed: EventFeed
  #state: WatchState = { kind: 'unpublished' }

  /** `events`: the mirror's array, read, never written. */
  constructor(id: string, events: readonly SessionEvent[], lifecycle: Lifecycle) {
    this.#id = id
    this.#events = events
    this.#lifecycle = lifecycle
    this.#feed = new EventFeed(events)
  }

  /** The mirror just appended `event`. */
  recorded(event: SessionEvent): void {
    this.#feed.appended()
    if (this.#state.kind === 'published') this.#offer(this.#state.runId, event)
  }

  /** Call right after `subagent/start`: listeners get what was recorded before, then each event live. */
  published(started: SubagentStartEvent): void {
    if (this.#state.kind !== 'unpublished') return
    this.#state = { kind: 'published', runId: started.runId }
    for (const event of this.#events) this.#offer(started.runId, event)
  }

  /** The run settled (`subagent/end` was emitted): readers end after the last recorded event. */
  settled(): void {
    this.#state = { kind: 'settled' }
    this.#feed.settle()
  }

  events(options?: EventsOptions): AsyncIterable<SessionEvent> {
    return this.#feed.read(options)
  }

  #offer(runId: string, event: SessionEvent): void {
    if (this.#lifecycle.listening('subagent/event')) this.#lifecycle.emit('subagent/event', { runId, id: this.#id, event })
  }
}
