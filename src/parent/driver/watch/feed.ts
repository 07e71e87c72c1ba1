/**
 * `run.events()` (CONTRACT.md §12): the host's mirror of a child's session read as a stream. Each
 * iterator is a cursor into the mirror's own array (events are appended, never changed or
 * removed), so a slow reader holds an index, not a copy of what it has yet to read, and no two
 * readers can see the events in different orders.
 */
import type { SessionEvent } from '../../../protocol/shapes/session.js'
import { InvalidOptionError, isNonNegativeSafeInteger } from '../../options.js'

export interface EventsOptions {
  /** The first event's seq (default 0). */
  from?: number
}

export class EventFeed {
  readonly #events: readonly SessionEvent[]
  #settled = false
  /** The cursors waiting for the next event: woken once each, then forgotten. */
  readonly #waiting = new Set<() => void>()

  /** `events`: the mirror's array, which this feed reads but never writes. */
  constructor(events: readonly SessionEvent[]) {
    this.#events = events
  }

  /** An event was appended to the mirror. */
  appended(): void {
    this.#wake()
  }

  /** The run settled: nothing more is appended, so readers end once they have read it all. */
  settle(): void {
    this.#settled = true
    this.#wake()
  }

  read(options: EventsOptions = {}): AsyncIterable<SessionEvent> {
    if (typeof options !== 'object' || options === null) throw new InvalidOptionError('events options', options, 'an object like { from?: number }')
    const { from = 0 } = options
    if (!isNonNegativeSafeInteger(from)) throw new InvalidOptionError('from', from, 'a non-negative safe integer (a seq)')
    return { [Symbol.asyncIterator]: () => new Cursor(this, from) }
  }

  /** @internal for Cursor */
  at(index: number): SessionEvent | undefined {
    return this.#events[index]
  }

  /** @internal for Cursor: the index of the first event whose seq is `from` or later. */
  indexOf(from: number): number {
    const events = this.#events
    // A child's own events have seq = index; only a forked foreign seed may number them otherwise.
    if (from >= events.length || events[from]!.seq === from) return from
    const found = events.findIndex((event) => event.seq >= from)
    return found === -1 ? events.length : found
  }

  /** @internal for Cursor */
  get settled(): boolean {
    return this.#settled
  }

  /** @internal for Cursor */
  wait(wake: () => void): void {
    this.#waiting.add(wake)
  }

  /** @internal for Cursor */
  unwait(wake: () => void): void {
    this.#waiting.delete(wake)
  }

  #wake(): void {
    if (this.#waiting.size === 0) return
    const waiting = [...this.#waiting]
    this.#waiting.clear()
    for (const wake of waiting) wake()
  }
}

type CursorState = { kind: 'reading' } | { kind: 'waiting'; resolve: (step: IteratorResult<SessionEvent>) => void } | { kind: 'closed' }

const DONE: IteratorResult<SessionEvent> = { done: true, value: undefined }

/** One reader's place in the feed: an index, and at most one pending `next()`. */
class Cursor implements AsyncIterator<SessionEvent> {
  readonly #feed: EventFeed
  #index: number | undefined
  readonly #from: number
  #state: CursorState = { kind: 'reading' }
  /** Calls of next() made while one is pending run after it, in order. */
  #queue: Promise<unknown> = Promise.resolve()
  readonly #wake = () => this.#advance()

  constructor(feed: EventFeed, from: number) {
    this.#feed = feed
    this.#from = from
  }

  next(): Promise<IteratorResult<SessionEvent>> {
    const step = this.#queue.then(() => this.#step())
    this.#queue = step
    return step
  }

  /** Leaving a loop early: the cursor stops waiting at once, and a pending next() ends. */
  return(): Promise<IteratorResult<SessionEvent>> {
    const state = this.#state
    this.#state = { kind: 'closed' }
    this.#feed.unwait(this.#wake)
    if (state.kind === 'waiting') state.resolve(DONE)
    return Promise.resolve(DONE)
  }

  #step(): Promise<IteratorResult<SessionEvent>> {
    const ready = this.#take()
    if (ready) return Promise.resolve(ready)
    return new Promise((resolve) => {
      this.#state = { kind: 'waiting', resolve }
      this.#feed.wait(this.#wake)
    })
  }

  /** The next step if there is one now: an event, or the end. */
  #take(): IteratorResult<SessionEvent> | undefined {
    if (this.#state.kind === 'closed') return DONE
    // Resolved on the first read, so `from` counts from what is recorded by then.
    this.#index ??= this.#feed.indexOf(this.#from)
    const event = this.#feed.at(this.#index)
    if (event) {
      this.#index++
      return { done: false, value: event }
    }
    if (this.#feed.settled) {
      this.#state = { kind: 'closed' }
      return DONE
    }
    return undefined
  }

  #advance(): void {
    const state = this.#state
    if (state.kind !== 'waiting') return
    this.#state = { kind: 'reading' }
    const ready = this.#take()
    if (ready) state.resolve(ready)
    else {
      this.#state = state
      this.#feed.wait(this.#wake)
    }
  }
}
