/**
 * Where frames from one runner enter the host, bounded (see RUNNER_BOUNDS). A frame too long or
 * too large is refused before it is read. The host reads at most `turnMessages` messages or
 * `turnFrames` frames of one runner per event-loop turn: then its endpoint stops delivering until the next turn, where it
 * can (a worker thread's port), and later frames wait in order where it cannot (a pipe that has
 * already been read). A runner that fills its share `fullTurns` turns in a row, or whose frames
 * waiting pass `backlogMessages`, sends faster than the host can read, and is refused. So a
 * runner that floods its channel neither holds the host's loop nor fills its memory for long.
 * Wire-agnostic, like the channel that owns it.
 */
import { estimatedSize, RUNNER_BOUNDS } from '../../protocol/bounds.js'
import { fromWire } from '../../protocol/messages.js'

/** What a chunk that crossed as its text costs the host beyond the text: the event it rebuilds for it. */
const REBUILT_CHUNK = estimatedSize(fromWire('', 0), Infinity)
/** The most items an array of a frame can hold within frameBytes, each at least the smallest value (estimatedSize's). */
const MAX_ITEMS = Math.floor(RUNNER_BOUNDS.frameBytes / estimatedSize(undefined, Infinity))

export interface IntakeOptions {
  /** Reads one frame (checks it and dispatches its messages). */
  read(frame: unknown): void
  /** The runner went past a bound; `what` says which, as "the runner sent <what>". */
  violation(what: string): void
  /** Stops (true) or resumes (false) delivery of frames, where the endpoint can. */
  pause?(paused: boolean): void
}

/** Open: frames are read as they come. Full: this turn's share is read, later frames wait. Closed: nothing more is read. */
type State = 'open' | 'full' | 'closed'

export class FrameIntake {
  readonly #options: IntakeOptions
  #state: State = 'open'
  /** Frames not read yet, each with the messages it makes (see sizeOf). */
  readonly #waiting: Array<{ frame: unknown; messages: number }> = []
  #waitingMessages = 0
  /** Messages and frames read in this event-loop turn. */
  #readThisTurn = 0
  #framesThisTurn = 0
  /** Turns in a row that ended with the share read. */
  #fullTurns = 0
  #turnEnd: NodeJS.Immediate | undefined

  constructor(options: IntakeOptions) {
    this.#options = options
  }

  accept(frame: unknown): void {
    if (this.#state === 'closed') return
    const messages = sizeOf(frame)
    if (typeof messages === 'string') return this.#refuse(messages)
    const refused = refusal(frame, messages)
    if (refused) return this.#refuse(refused)
    if (this.#state === 'open') return this.#read(frame, messages)
    if (this.#waitingMessages + messages > RUNNER_BOUNDS.backlogMessages) {
      return this.#refuse(`frames faster than the host can read them (more than ${RUNNER_BOUNDS.backlogMessages} messages waiting to be read)`)
    }
    this.#waiting.push({ frame, messages })
    this.#waitingMessages += messages
  }

  /** Reads every frame still waiting, now: the runner is gone, and all it sent comes before its end. */
  drain(): void {
    while (this.#state !== 'closed' && this.#waiting.length > 0) this.#readWaiting()
  }

  /** Nothing more is read; frames still waiting are dropped. */
  close(): void {
    this.#state = 'closed'
    this.#waiting.length = 0
    this.#waitingMessages = 0
    if (this.#turnEnd) clearImmediate(this.#turnEnd)
    this.#turnEnd = undefined
  }

  #readWaiting(): void {
    const { frame, messages } = this.#waiting.shift()!
    this.#waitingMessages -= messages
    this.#read(frame, messages)
  }

  #read(frame: unknown, messages: number): void {
    this.#readThisTurn += messages
    this.#framesThisTurn++
    this.#turnEnd ??= setImmediate(() => this.#turnEnded())
    const full = this.#readThisTurn >= RUNNER_BOUNDS.turnMessages || this.#framesThisTurn >= RUNNER_BOUNDS.turnFrames
    if (full && this.#state === 'open') {
      this.#state = 'full'
      this.#options.pause?.(true)
    }
    this.#options.read(frame)
  }

  /** A new turn: the waiting frames first, up to the turn's share, then the endpoint again. */
  #turnEnded(): void {
    this.#turnEnd = undefined
    this.#readThisTurn = 0
    this.#framesThisTurn = 0
    if (this.#state !== 'full') return void (this.#fullTurns = 0)
    if (++this.#fullTurns > RUNNER_BOUNDS.fullTurns) {
      const { turnMessages, turnFrames, fullTurns } = RUNNER_BOUNDS
      return this.#refuse(`frames faster than the host can read them (${turnFrames} frames or ${turnMessages} messages a turn, ${fullTurns} turns in a row)`)
    }
    this.#state = 'open'
    while (this.#state === 'open' && this.#waiting.length > 0) this.#readWaiting()
    // Still open: what waited is read, and the endpoint may deliver again.
    if (this.#state === 'open') this.#options.pause?.(false)
  }

  #refuse(what: string): void {
    this.close()
    this.#options.violation(what)
  }
}

/**
 * The messages a frame makes on the host: a `texts` message one for each child it names (the
 * events message the host makes for that child's chunks, as a child's own `events` counts one
 * however many events it holds). Or why the frame is refused by its arrays' lengths alone: each
 * is checked before anything loops over it, since a sparse array crosses in a few bytes whatever
 * length it claims, and a loop over it would hold the host's thread for as long as the runner likes.
 */
function sizeOf(frame: unknown): number | string {
  if (!Array.isArray(frame)) return 1
  const { frameMessages, frameBytes } = RUNNER_BOUNDS
  if (frame.length > frameMessages) return `a frame of ${frame.length} messages (one frame may carry at most ${frameMessages})`
  let messages = frame.length
  for (const message of frame) {
    const texts = textsOf(message)
    if (texts.length > MAX_ITEMS || eventsOf(message).length > MAX_ITEMS) return `a frame larger than ${frameBytes} bytes`
    if (texts.length > 2) messages += childrenIn(texts) - 1
  }
  return messages
}

function childrenIn(texts: unknown[]): number {
  const children = new Set<unknown>()
  for (let i = 0; i < texts.length; i += 2) children.add(texts[i])
  return children.size
}

/** Why a frame is refused before it is read, if it is: too many messages, too large, an event too large. */
function refusal(frame: unknown, messages: number): string | undefined {
  if (!Array.isArray(frame)) return undefined // the channel names a malformed frame
  const { frameMessages, frameBytes, eventBytes } = RUNNER_BOUNDS
  if (messages > frameMessages) return `a frame of ${messages} messages (one frame may carry at most ${frameMessages})`
  let left = frameBytes
  for (const message of frame) {
    // Each event as the host reads it, a text as the event it rebuilds (in a `texts` message, the
    // odd items; the even ones, children's ids, count as themselves).
    const texts = textsOf(message)
    const items = texts.length > 0 ? texts : eventsOf(message)
    for (let i = 0; i < items.length; i++) {
      const item = items[i]
      const event = texts.length === 0 || i % 2 === 1
      const size = !event && typeof item === 'string' ? item.length : eventSize(item, Math.min(eventBytes, left))
      if (event && size > eventBytes) return `an event larger than ${eventBytes} bytes`
      left -= size
      if (left < 0) return `a frame larger than ${frameBytes} bytes`
    }
    left -= estimatedSize(message, left, texts.length > 0 ? 'texts' : items.length > 0 ? 'events' : undefined)
    if (left < 0) return `a frame larger than ${frameBytes} bytes`
  }
  return undefined
}

/** What an event costs the host: a chunk that crossed as its text, the event rebuilt for it. */
function eventSize(event: unknown, limit: number): number {
  return typeof event === 'string' ? REBUILT_CHUNK + event.length : estimatedSize(event, limit)
}

/** The chunks a `texts` message carries, side by side with their children, before it is checked. */
function textsOf(message: unknown): unknown[] {
  const texts = (message as { type?: unknown; texts?: unknown } | null)?.type === 'texts' ? (message as { texts?: unknown }).texts : undefined
  return Array.isArray(texts) ? texts : []
}

/** The events a message carries (measured one by one), before it is checked: only its shape is trusted this far. */
function eventsOf(message: unknown): unknown[] {
  const events = (message as { events?: unknown } | null)?.events
  return Array.isArray(events) ? events : []
}
