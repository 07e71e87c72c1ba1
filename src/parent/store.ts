/**
 * Session stores keep transcripts beyond the live registry: a disposed child leaves
 * `host.agents`, never the store. Writes for one session are ordered and batched.
 */
import type { SessionEvent, SessionHeader } from '../protocol/session.js'

export interface SessionStore {
  create(header: SessionHeader): Promise<void>
  append(id: string, events: readonly SessionEvent[]): Promise<void>
  read(id: string): Promise<{ header: SessionHeader; events: SessionEvent[] } | undefined>
  list(): Promise<SessionHeader[]>
}

export function createMemoryStore(): SessionStore {
  const sessions = new Map<string, { header: SessionHeader; events: SessionEvent[] }>()
  return {
    async create(header) {
      if (sessions.has(header.id)) throw new Error(`session "${header.id}" already exists in the store`)
      sessions.set(header.id, { header: { ...header }, events: [] })
    },
    async append(id, events) {
      const session = sessions.get(id)
      if (!session) throw new Error(`session "${id}" is not in the store: create it first`)
      session.events.push(...events)
    },
    async read(id) {
      const session = sessions.get(id)
      return session && { header: { ...session.header }, events: [...session.events] }
    },
    async list() {
      return [...sessions.values()].map((s) => ({ ...s.header }))
    },
  }
}

/**
 * Streams one session into a store: create first, then events in order, in batches of whatever
 * arrived while the previous write was in flight. A failed write is kept and reported by
 * `flushed()`; nothing is dropped silently.
 */
export class SessionWriter {
  readonly #store: SessionStore
  readonly #id: string
  #chain: Promise<void>
  #pending: SessionEvent[] = []
  #queued = false
  #failure: unknown

  /** `existing`: the session is already in the store (a resumed agent), so only append. */
  constructor(store: SessionStore, header: SessionHeader, events: readonly SessionEvent[], existing = false) {
    this.#store = store
    this.#id = header.id
    this.#pending = [...events]
    this.#chain = existing ? Promise.resolve() : this.#guard(() => store.create(header))
    this.#schedule()
  }

  append(event: SessionEvent): void {
    this.#pending.push(event)
    this.#schedule()
  }

  /** Resolves once everything appended so far is written; rejects if any write failed. */
  async flushed(): Promise<void> {
    await this.#chain
    if (this.#failure !== undefined) {
      throw new Error(`session store failed for "${this.#id}": ${(this.#failure as Error)?.message ?? String(this.#failure)}`, { cause: this.#failure })
    }
  }

  #schedule(): void {
    if (this.#queued || this.#pending.length === 0) return
    this.#queued = true
    this.#chain = this.#chain.then(() =>
      this.#guard(() => {
        this.#queued = false
        const batch = this.#pending
        this.#pending = []
        return this.#store.append(this.#id, batch)
      }),
    )
  }

  async #guard(write: () => Promise<void>): Promise<void> {
    if (this.#failure !== undefined) {
      this.#queued = false
      this.#pending = []
      return
    }
    try {
      await write()
    } catch (error) {
      this.#failure = error
    }
  }
}
