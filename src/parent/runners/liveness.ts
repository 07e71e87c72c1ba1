/**
 * When a peer's silence is its death: one judge for the pool over its runners, a host over its
 * nodes and a node over its hosts. Each checks its peers on an interval timer, and a peer is
 * silent only when, by the judge's own clock,
 *
 * - it has been silent longer than the limit, not counting the time the judge's own event loop
 *   was held (a tick that fires late measures how long: a host whose loop was blocked 3 s read
 *   nothing for 3 s and cannot blame the peer for them); and
 * - it still is after the loop's next poll phase: timers run before I/O, so the first check after
 *   a held loop comes before the answer already waiting, unread, in a socket or port.
 *
 * A dead peer is still judged: with the loop free, silence grows with the clock, and a held loop
 * only delays the verdict by the time it was held.
 */

/** Where a silence starts: when (the judge's clock) and how much held time the judge had counted by then. */
export interface Mark {
  readonly at: number
  readonly held: number
}

export interface SilenceJudgeOptions {
  /** Silence longer than this is death. */
  limitMs: number
  /** How often `check` is called: a tick later than this was held for the difference. */
  intervalMs: number
  /** The clock; default performance.now. */
  now?: () => number
  /** Runs `fn` after the event loop's next poll phase; default setImmediate. */
  afterPoll?: (fn: () => void) => void
}

export class SilenceJudge {
  readonly limitMs: number
  readonly intervalMs: number
  readonly #now: () => number
  readonly #afterPoll: (fn: () => void) => void
  /** When the last tick ran (moved on by held time counted since, so no hold is counted twice). */
  #lastTick: number
  /** Every ms the loop was held, since the judge began. */
  #held = 0

  constructor(options: SilenceJudgeOptions) {
    this.limitMs = options.limitMs
    this.intervalMs = options.intervalMs
    this.#now = options.now ?? (() => performance.now())
    this.#afterPoll = options.afterPoll ?? ((fn) => void setImmediate(fn))
    this.#lastTick = this.#now()
  }

  /** How long the judge's loop was held in all, so far (ms). */
  get held(): number {
    return this.#held
  }

  /** Now: where a silence starts (a ping sent, a frame heard). */
  mark(): Mark {
    return { at: this.#now(), held: this.#held }
  }

  /** How long since `mark`, not counting held time (0 without a mark). */
  silentFor(mark: Mark | undefined): number {
    if (mark === undefined) return 0
    return Math.max(0, this.#now() - mark.at - (this.#held - mark.held))
  }

  /** The interval timer starts again after a pause (nothing was watched): the pause is no hold. */
  resume(): void {
    this.#lastTick = this.#now()
  }

  /**
   * One check, on the interval timer: every peer whose mark is past the limit, and still is after
   * the next poll phase (`markOf` is asked again then: an answer read meanwhile has moved or
   * cleared it), gets `silent` with its silence in ms. `markOf` gives undefined for a peer that
   * owes nothing (no ping outstanding) or must not be judged now. Returns the peers awaiting
   * that verdict, which the caller leaves alone meanwhile.
   */
  check<P>(peers: Iterable<P>, markOf: (peer: P) => Mark | undefined, silent: (peer: P, ms: number) => void): ReadonlySet<P> {
    const tickedAt = this.#tick()
    const suspects = new Set([...peers].filter((peer) => this.silentFor(markOf(peer)) > this.limitMs))
    if (suspects.size === 0) return suspects
    this.#afterPoll(() => {
      // A hold between the tick and now (another timer's callback, say) is the judge's too.
      const late = Math.max(0, this.#now() - tickedAt)
      this.#held += late
      this.#lastTick += late
      for (const peer of suspects) {
        const ms = this.silentFor(markOf(peer))
        if (ms > this.limitMs) silent(peer, ms)
      }
    })
    return suspects
  }

  /** Counts how late this tick is as held time; returns now. */
  #tick(): number {
    const now = this.#now()
    this.#held += Math.max(0, now - this.#lastTick - this.intervalMs)
    this.#lastTick = now
    return now
  }
}
