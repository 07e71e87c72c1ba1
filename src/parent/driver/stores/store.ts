/**
 * Session stores keep transcripts beyond the live registry: a disposed child leaves
 * `host.agents`, never the store. Writes for one session are ordered and batched.
 */
import { randomUUID } from 'node:crypto'
import type { SessionEvent, SessionHeader } from '../../../protocol/shapes/session.js'
import { subagentError, SubagentError } from '../../../protocol/errors.js'

export interface SessionStore {
  create(header: SessionHeader): Promise<void>
  append(id: string, events: readonly SessionEvent[]): Promise<void>
  read(id: string): Promise<{ header: SessionHeader; events: SessionEvent[] } | undefined>
  /** The sessions' headers (those matching `filter`), and the transcripts that could not be read, each with why. */
  list(filter?: SessionFilter): Promise<SessionList>
  /**
   * Forgets a session; deleting one that is not there is not an error. A session this store is
   * still writing (its agent is live: not yet released) is refused with a SessionLiveError.
   */
  delete(id: string): Promise<void>
  /**
   * Optional: this store is done writing the session (its agent was disposed, or its host
   * closed), so another store or process may write it now. The host calls it after the last
   * write of each session.
   */
  release?(id: string): Promise<void>
}

/**
 * `store.delete(id)` of a session whose agent is still live: its next write, or its host's
 * close(), would fail far from the cause, so the delete is refused instead, as resumeAgent
 * refuses a live id.
 */
export class SessionLiveError extends SubagentError<'ERR_SUBAGENT_SESSION_LIVE'> {
  override name = 'SessionLiveError'
  readonly sessionId: string

  constructor(id: string) {
    super('ERR_SUBAGENT_SESSION_LIVE', `session "${id}" is live: dispose() its agent (or close its host) before deleting its transcript`)
    this.sessionId = id
  }
}

/** What an id may be: it names the session everywhere, a file too. */
const SESSION_ID = /^(?!\.{1,2}$)[A-Za-z0-9._-]{1,200}$/

/** Returns `id` when a session may have it; throws a TypeError saying what an id may be. */
export function checkSessionId(id: unknown): string {
  if (typeof id !== 'string' || !SESSION_ID.test(id)) {
    throw subagentError('ERR_SUBAGENT_SESSION_ID', `session id ${JSON.stringify(id)} is not allowed: use 1 to 200 letters, digits, ".", "_" or "-" (it names a file in an ndjson store)`)
  }
  return id
}

/**
 * A new session id: a random UUID, as one flat string. `randomUUID()` returns its string as a
 * rope of pieces, about 490 bytes that stay so for as long as the id lives (Node 20 and 24);
 * an id lives as long as its transcript does, and a host keeps every disposed continuable
 * child's, so it is flattened here (about 65 bytes, 0.1 µs).
 */
export function newSessionId(): string {
  return randomUUID().normalize()
}

export interface SessionFilter {
  label?: string
  parentSession?: string
}

export interface SessionList {
  sessions: SessionHeader[]
  unreadable: Array<{ id: string; error: string }>
}

/** Whether a header matches a filter (every field given must be equal). */
export function matches(header: SessionHeader, filter: SessionFilter = {}): boolean {
  return (filter.label === undefined || header.label === filter.label) && (filter.parentSession === undefined || header.parentSession === filter.parentSession)
}

/** A header as read back: one written before `type` existed gets it. */
export function readHeader(header: SessionHeader): SessionHeader {
  return header.type === 'session' ? header : { type: 'session', ...header }
}

export interface MemoryStoreOptions {
  /**
   * Keep a session after its agent is released (disposed, or its host closed); default true.
   * False keeps only live sessions: no history, and memory that does not grow with every run.
   */
  retain?: boolean
}

export function createMemoryStore(options: MemoryStoreOptions = {}): SessionStore {
  const retain = options.retain ?? true
  if (typeof retain !== 'boolean') throw subagentError('ERR_SUBAGENT_DEFINITION', 'createMemoryStore retain must be true or false')
  const sessions = new Map<string, { header: SessionHeader; events: SessionEvent[] }>()
  /** Sessions written since their last release: their agents are live. */
  const live = new Set<string>()
  return {
    async create(header) {
      if (sessions.has(header.id)) throw subagentError('ERR_SUBAGENT_DUPLICATE', `session "${header.id}" already exists in the store`)
      sessions.set(header.id, { header: { ...header }, events: [] })
      live.add(header.id)
    },
    async append(id, events) {
      const session = sessions.get(id)
      if (!session) throw subagentError('ERR_SUBAGENT_STORE', `session "${id}" is not in the store: create it first`)
      session.events.push(...events)
      live.add(id)
    },
    async read(id) {
      const session = sessions.get(id)
      return session && { header: { ...session.header }, events: [...session.events] }
    },
    async list(filter) {
      return { sessions: [...sessions.values()].filter((s) => matches(s.header, filter)).map((s) => ({ ...s.header })), unreadable: [] }
    },
    async delete(id) {
      if (live.has(id)) throw new SessionLiveError(id)
      sessions.delete(id)
    },
    async release(id) {
      live.delete(id)
      if (!retain) sessions.delete(id)
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

  /** Writes what is left, then lets the store release the session; rejects as `flushed` does. */
  async close(): Promise<void> {
    try {
      await this.flushed()
    } finally {
      await this.#store.release?.(this.#id)
    }
  }

  /** Resolves once everything appended so far is written; rejects if any write failed. */
  async flushed(): Promise<void> {
    await this.#chain
    if (this.#failure !== undefined) {
      throw subagentError('ERR_SUBAGENT_STORE', `session store failed for "${this.#id}": ${(this.#failure as Error)?.message ?? String(this.#failure)}`, { cause: this.#failure })
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
