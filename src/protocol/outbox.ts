/**
 * Coalescing: one frame per event-loop turn per channel, whatever number of children and
 * messages it carries. Messages queue until the end of the turn (setImmediate), then cross
 * together; waking a sleeping thread costs far more than the bytes.
 *
 * A message queued in the current epoch (not yet sent) may still be amended by its owner, which
 * is how a child's events and a model call's chunks grow into one message each per frame.
 */

/** Where messages go: queued now, sent at the end of the turn. */
export interface Sink<M> {
  push(message: M): void
  /** Changes whenever queued messages are sent: a message pushed in this epoch may still be amended. */
  readonly epoch: number
}

export interface OutboxOptions<M> {
  /** Sends one frame; throws when a message cannot be encoded. */
  send(frame: M[]): void
  /** Which child a message belongs to (so one bad message costs only its own child). */
  ownerOf(message: M): string | undefined
  /** A message that could not be sent; its owner's later messages in that frame are not sent either. */
  unsendable(message: M, error: unknown): void
  /** Messages that ride the next frame, but make none of their own unless nudged (see `nudge`): asked for at each send. */
  riders?(): M[]
}

export class Outbox<M> implements Sink<M> {
  readonly #options: OutboxOptions<M>
  #queue: M[] = []
  #epoch = 0
  #scheduled = false
  /** A frame goes at the end of this turn even if only riders fill it. */
  #nudged = false
  #closed = false
  /** Code waiting to run right after the next send (see `afterSent`). */
  #waiting: Array<() => void> = []

  constructor(options: OutboxOptions<M>) {
    this.#options = options
  }

  get epoch(): number {
    return this.#epoch
  }

  push(message: M): void {
    if (this.#closed) return
    this.#queue.push(message)
    this.#schedule()
  }

  /** Sends a frame at the end of this turn for the riders alone, if nothing else is queued by then. */
  nudge(): void {
    if (this.#closed) return
    this.#nudged = true
    this.#schedule()
  }

  /**
   * Runs `code` once everything queued so far has been sent: at once when nothing is queued,
   * else right after the end-of-turn send, together with every other caller of this turn (their
   * synchronous parts run back to back, so none can queue anything in between). Used before
   * running code that may take the channel down with it (a spin, an exit, a crash).
   */
  afterSent<T>(code: () => T): Promise<Awaited<T>> {
    if (this.#queue.length === 0 || this.#closed) return run(code)
    return new Promise((resolve, reject) => {
      this.#waiting.push(() => run(code).then(resolve, reject))
    })
  }

  /** Sends everything queued now. */
  flush(): void {
    this.#scheduled = false
    const nudged = this.#nudged
    this.#nudged = false
    if (this.#queue.length > 0 || nudged) {
      const riders = this.#options.riders?.() ?? []
      const frame = riders.length > 0 ? this.#queue.concat(riders) : this.#queue
      this.#queue = []
      if (frame.length > 0) {
        this.#epoch++
        this.#send(frame)
      }
    }
    const waiting = this.#waiting
    this.#waiting = []
    for (const resume of waiting) resume()
  }

  /** Drops whatever is queued; later pushes are ignored. */
  close(): void {
    this.#closed = true
    this.#queue = []
    const waiting = this.#waiting
    this.#waiting = []
    for (const resume of waiting) resume()
  }

  #schedule(): void {
    if (this.#scheduled) return
    this.#scheduled = true
    setImmediate(() => this.flush())
  }

  #send(frame: M[]): void {
    const { send, ownerOf, unsendable } = this.#options
    try {
      send(frame)
      return
    } catch {
      // One message could not be encoded: send the rest one by one, so only its owner pays.
    }
    const failed = new Set<string | undefined>()
    for (const message of frame) {
      const owner = ownerOf(message)
      if (owner !== undefined && failed.has(owner)) continue
      try {
        send([message])
      } catch (error) {
        failed.add(owner)
        unsendable(message, error)
      }
    }
  }
}

/** Runs code now, turning a synchronous throw into a rejection. */
function run<T>(code: () => T): Promise<Awaited<T>> {
  try {
    return Promise.resolve(code())
  } catch (error) {
    return Promise.reject(error)
  }
}

/**
 * A frame with the messages `join` takes laid side by side in one list message (`listOf`), at
 * the first one's place: `join` pushes a message's items onto the list and says whether it took
 * it. A message is offered only while nothing else of its child came after the list's place, so
 * each child's messages keep their order. A frame with nothing taken is returned as it is.
 */
export function sideBySide<M extends { child?: string }, I, L>(frame: M[], join: (message: M, items: I[]) => boolean, listOf: (items: I[]) => L): Array<M | L> {
  const items: I[] = []
  /** From the first message taken on: the frame as it goes, and the children with a message after the list's place. */
  let flat: { messages: Array<M | L>; after: Set<string | undefined> } | undefined
  for (let i = 0; i < frame.length; i++) {
    const message = frame[i]!
    if (!flat?.after.has(message.child) && join(message, items)) {
      if (!flat) {
        const messages: Array<M | L> = frame.slice(0, i)
        messages.push(listOf(items))
        flat = { messages, after: new Set() }
      }
    } else if (flat) {
      flat.after.add(message.child)
      flat.messages.push(message)
    }
  }
  return flat?.messages ?? frame
}
