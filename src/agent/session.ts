/** An agent's session: a header and append-only events, with listeners for each append. */
import type { SessionEvent, SessionEventMap, SessionEventType, SessionHeader } from '../protocol/shapes/session.js'

export type EventListener = (event: SessionEvent) => void

export class Session {
  readonly header: SessionHeader
  readonly events: SessionEvent[]
  #listener: EventListener | undefined

  constructor(header: SessionHeader, seed: readonly SessionEvent[] = []) {
    this.header = header
    this.events = [...seed]
  }

  /** One listener: the mirror or the store writer that owns this session's copy. */
  onAppend(listener: EventListener | undefined): void {
    this.#listener = listener
  }

  append<T extends SessionEventType>(type: T, data: SessionEventMap[T]): SessionEvent {
    // The type parameter ties `data` to `type`; the checker cannot see through the generic pair.
    const event = { seq: this.events.length, type, data } as SessionEvent
    this.events.push(event)
    this.#listener?.(event)
    return event
  }
}
