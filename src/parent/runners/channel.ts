/**
 * The host's end of one channel to a runner, on the host or a link to a node (src/remote): the frames in both
 * directions, the version handshake, and the children placed on that runner. Wire-agnostic: the
 * owner gives it a `send(frame)`, feeds it each frame received, and ends it once the runner is
 * gone.
 *
 * A frame is checked once, whole, at the boundary; only when it fails is each message checked
 * alone, to blame the child it is about. A message may address only the children placed on this
 * runner: anything else means the runner cannot be trusted, and it is stopped. Frames enter
 * through a bounded intake (intake.ts), so what one runner sends cannot hold the host's loop.
 *
 * One explicit state machine, one way out: whatever ends the runner (it exited, the host stopped
 * it, a node link was given up) goes through `end`, once, which ends every child still on it.
 * `ready` repeats (a runner may say it again); a node says it once a thread of the host's module did.
 *
 *   opening ──hello──▶ greeted ──ready──▶ ready
 *      │                  │                 │
 *      └──────────────────┼─────────────────┘
 *          protocol error │ the runner is gone
 *            ┌────────────┴────────────┐
 *            ▼                         ▼
 *        distrusted ──runner gone──▶ ended
 *
 * A hello in another version, a `fatal`, a child's fault or silence make the owner stop the
 * runner (`kill`) in whatever phase it is: its end follows.
 */
import { childOf, PROTOCOL_VERSION, type ChildFault, type HostMessage, type RunnerConfig, type RunnerMessage } from '../../protocol/messages.js'
import { fromWireError } from '../../protocol/shapes/error.js'
import { Outbox } from '../../protocol/outbox.js'
import { isRunnerFrame, isRunnerMessage } from '../../protocol/validators.js'
import { describeShape } from '../../protocol/values.js'
import { messageOf } from '../../protocol/errors.js'
import { FrameIntake } from './intake.js'
import type { Mobility, RunnerHooks } from './move-point.js'
import { versionMismatchText } from '../../protocol/errors.js'
import type { Mark } from './liveness.js'
import type { ToolSchema } from '../../protocol/shapes/model.js'

/** Why a child ended when its runner did. */
export type Fault = ChildFault

/** What the channel needs of each child placed on its runner. */
export interface ChannelChild {
  readonly id: string
  /** Running its turn and not asked to stop: its runner may legitimately be too busy to answer. */
  readonly busy: boolean
  receive(message: Extract<RunnerMessage, { child: string }>): void
  /** The exchange about this child broke; `what` says how. */
  broken(what: string): void
  /** The runner is gone; `movable`: for a fault a thread-mate survives (CONTRACT.md §8), so the child may move, judged as it says. */
  end(fault: Fault, movable: Mobility | undefined): void
}

/** What kind of runner a channel leads to, as diagnostics name it. */
export interface RunnerKind {
  /** 'worker thread', 'child process' */
  noun: string
  /** What stopping one does to it: 'terminated', 'killed'. */
  ended: string
  /** A node, which runs its children on threads of its own: only it says a child's thread ended (`ended`). */
  relays?: true
}

export interface ChannelOptions {
  kind: RunnerKind
  /** Names the runner in diagnostics, e.g. "worker thread 7". */
  label: string
  config: RunnerConfig
  /** Sends one frame; throws when a message cannot be encoded. */
  send(frame: HostMessage[]): void
  /**
   * Stops the runner for good; its owner calls `end` once it is gone. A stop on account of a
   * culprit leaves its thread-mates movable; `movable` says so where there is none.
   */
  kill(fault: Fault, culprit?: Culprit, movable?: Mobility): void
  /** The runner reports an uncaught error that is about to end it. */
  crashed(error: Error): void
  /** A child arrived or left: the runner's load changed. */
  changed(): void
  /** Stops (true) or resumes (false) delivery of frames, where the wire can: the host reads a runner's frames at its own pace. */
  pause?(paused: boolean): void
  /** Drops, unread, whatever the runner still sends: it broke the protocol. */
  discard?(): void
}

/** The child a runner is stopped on account of, and what it is told; the others share the runner's fault. */
export interface Culprit {
  child: ChannelChild
  fault: Fault
}

/** The phases of a runner that is still being read (see the diagram above). */
type Open = 'opening' | 'greeted' | 'ready'

/**
 * Where the channel is. The last two remember how far the runner had come: one that never loaded
 * its module would not load it either if tried again.
 */
type Phase = { name: Open } | { name: 'distrusted' | 'ended'; reached: Open }

export class RunnerChannel {
  readonly kind: RunnerKind
  readonly label: string
  /** What every child on this runner shares: the host's, not the runner's, word on it. */
  readonly config: RunnerConfig
  readonly outbox: Outbox<HostMessage>
  readonly #options: ChannelOptions
  readonly #children = new Map<string, ChannelChild>()
  /** Children told to drop, whose runner has not confirmed yet: their late messages are expected. */
  readonly #dropping = new Set<string>()
  #phase: Phase = { name: 'opening' }
  /** The module hooks the runner said it has with its `ready`: a child reads them even after its runner ended. */
  #hooks: RunnerHooks
  /** The module's tool schemas the runner sent with its `ready`: its model calls name them by index. */
  #tools: readonly ToolSchema[] = []
  /** When the unanswered ping was sent, by its judge's clock, if one is. */
  #pinged: Mark | undefined
  #pings = 0
  /** The last ping answered: a pong answers a later ping that was sent (one may be lost on the way, as over Redis), never one twice. */
  #ponged = 0
  readonly #intake: FrameIntake
  /** When the last child left (performance.now()). */
  #idleSince = performance.now()
  /** When the channel opened (performance.now()): a runner's module load is bounded from here. */
  readonly openedAt = performance.now()

  constructor(options: ChannelOptions) {
    this.kind = options.kind
    this.label = options.label
    this.config = options.config
    this.#options = options
    this.outbox = new Outbox<HostMessage>({
      send: options.send,
      ownerOf: childOf,
      unsendable: (message, error) => {
        const child = this.#children.get(childOf(message) ?? '')
        child?.broken(`a '${message.type}' message for it could not be sent to the ${this.label}: ${messageOf(error)}`)
      },
    })
    this.#intake = new FrameIntake({
      read: (frame) => this.#read(frame),
      violation: (what) => this.violation(what),
      ...(options.pause ? { pause: options.pause } : {}),
    })
    this.outbox.push({ type: 'welcome', v: PROTOCOL_VERSION, config: options.config })
  }

  /** How far the runner came: 'ready' once it loaded its module. */
  get reached(): Open {
    const phase = this.#phase
    return 'reached' in phase ? phase.reached : phase.name
  }

  /** Whether the runner is still loading its module: up and not ready yet. */
  get loading(): boolean {
    return this.#phase.name === 'opening' || this.#phase.name === 'greeted'
  }

  /** Children holding a slot on this runner. */
  get load(): number {
    return this.#children.size
  }

  /** Whether the runner's silence means it is stuck: it is ready, and no child of it may be running module code. */
  get judgeable(): boolean {
    if (this.#phase.name !== 'ready') return false
    for (const child of this.#children.values()) if (child.busy) return false
    return true
  }

  /** The module hooks the runner said it has (undefined until it said). */
  get hooks(): RunnerHooks {
    return this.#hooks
  }

  /** The runner's table of its module's tools (empty until it said). */
  get moduleTools(): readonly ToolSchema[] {
    return this.#tools
  }

  get idleSince(): number | undefined {
    return this.#children.size === 0 ? this.#idleSince : undefined
  }

  /** When the runner was sent the ping it has not answered yet, if one (its silence is judged from there). */
  get pinged(): Mark | undefined {
    return this.#pinged
  }

  /** Pings the runner, unless a ping is outstanding: `at` is now, by the judge that will judge the answer. */
  ping(at: Mark): void {
    if (this.#pinged !== undefined || this.#phase.name === 'ended') return
    this.#pinged = at
    this.outbox.push({ type: 'ping', n: ++this.#pings })
  }

  /** Whether the child of this id is on this runner. */
  hosts(id: string): boolean {
    return this.#children.has(id)
  }

  adopt(child: ChannelChild): void {
    this.#children.set(child.id, child)
    this.#options.changed()
  }

  send(message: HostMessage): void {
    if (this.#phase.name !== 'ended') this.outbox.push(message)
  }

  /** A child left; `drop`: the runner still holds it and must be told to let it go. */
  part(child: ChannelChild, drop: boolean): void {
    if (this.#children.get(child.id) !== child) return
    this.#children.delete(child.id)
    if (this.#children.size === 0) this.#idleSince = performance.now()
    if (drop && this.#phase.name !== 'ended') {
      this.#dropping.add(child.id)
      this.outbox.push({ type: 'drop', child: child.id })
    }
    this.#options.changed()
  }

  kill(fault: Fault, culprit?: Culprit): void {
    this.#options.kill(fault, culprit)
  }

  receive(frame: unknown): void {
    if (!this.#reading) return
    this.#pinged = undefined
    this.#intake.accept(frame)
  }

  /** The runner broke the protocol in a way no single child accounts for: it cannot be trusted. */
  violation(what: string): void {
    if (this.#phase.name === 'distrusted' || this.#phase.name === 'ended') return
    this.#phase = { name: 'distrusted', reached: this.reached }
    this.#intake.close()
    this.#options.discard?.()
    // Nothing it sent after this is read, as with a runner that stopped answering: only the
    // children a host call holds are sure to be where the host saw them, and they move (§8).
    this.#options.kill({ stopReason: 'error', diagnostic: `protocol error: the ${this.label} sent ${what}, so it was stopped` }, undefined, 'held')
  }

  /** One frame, in its turn: checked whole, and only when that fails message by message. */
  #read(frame: unknown): void {
    if (!this.#reading) return
    if (isRunnerFrame(frame)) {
      for (const message of frame) if (this.#reading) this.#dispatch(message)
      return
    }
    if (!Array.isArray(frame) || frame.length === 0) return this.violation(`a malformed frame ${describeShape(frame)}`)
    for (const message of frame as unknown[]) {
      if (!this.#reading) return
      if (isRunnerMessage(message)) {
        this.#dispatch(message)
        continue
      }
      const what = `a malformed or unknown message ${describeShape(message)}: ${isRunnerMessage.explain(message, 'message')}`
      const child = this.#children.get(childOf(message) ?? '')
      if (child) child.broken(`the ${this.label} sent ${what}`)
      else this.violation(what)
    }
  }

  /**
   * The runner is gone: every child still on it ends with `fault` (the culprit with its own).
   * `movable`: it went for a fault its other children survive (a culprit, a crash, silence), not
   * because the host closed or distrusted it; and how much of what it sent the host has read.
   */
  end(fault: Fault, culprit?: Culprit, movable?: Mobility): void {
    if (this.#phase.name === 'ended') return
    // What a runner sent before it went comes before its end, unless it broke the protocol.
    if (this.#reading) this.#intake.drain()
    this.#intake.close()
    this.#phase = { name: 'ended', reached: this.reached }
    this.outbox.close()
    const children = [...this.#children.values()]
    // A runner that went of itself with one child on it was taken down by that child (a timer
    // that throws after its tool returned, say): the crash is its own, and moving it would replay it.
    // A node that died was not: its children's code runs on its threads.
    const mates = movable === 'held' || culprit !== undefined || children.length > 1 ? movable : undefined
    for (const child of children) {
      if (culprit?.child === child) child.end(culprit.fault, undefined)
      else child.end(fault, mates)
    }
    this.#dropping.clear()
  }

  /** Whether what the runner sends is still read: it is neither distrusted nor gone. */
  get #reading(): boolean {
    return this.#phase.name !== 'distrusted' && this.#phase.name !== 'ended'
  }

  #dispatch(message: RunnerMessage): void {
    switch (message.type) {
      case 'hello':
        if (message.v !== PROTOCOL_VERSION) {
          return this.kill({
            stopReason: 'error',
            diagnostic: versionMismatchText(`the ${this.label}`, message.v, 'this host', PROTOCOL_VERSION),
          })
        }
        // A node that links again does so on a link of its own (src/remote/envelope.ts): a channel is greeted once.
        if (this.#phase.name !== 'opening') return this.violation(`a second 'hello'`)
        this.#phase = { name: 'greeted' }
        return
      case 'fatal':
        return this.kill({ stopReason: 'error', diagnostic: `the ${this.label} gave up on its channel: ${message.error.message}` })
      case 'crashed':
        return this.#options.crashed(fromWireError(message.error))
      case 'ready':
        if (this.#phase.name === 'opening') return this.violation(`a 'ready' before its 'hello'`)
        // The module's tools and hooks are said once: a later word may come (harmless) but is not
        // believed, or it would rewrite mid-run what the host offers its model and how it judges a move.
        if (this.#phase.name !== 'greeted') return
        this.#phase = { name: 'ready' }
        if (message.hooks) this.#hooks = new Set(message.hooks)
        if (message.tools) this.#tools = message.tools
        return
      case 'pong':
        if (message.n <= this.#ponged || message.n > this.#pings) {
          return this.violation(`an unsolicited pong (${message.n}, after ${this.#pings} pings of which ${this.#ponged} were answered)`)
        }
        this.#ponged = message.n
        return
      case 'texts':
        return this.#texts(message.texts)
      case 'ended':
        // A thread or a process is the child's runner itself: its end is the channel's, seen by the host.
        if (!this.#options.kind.relays) return this.violation(`an 'ended' message, which only a node sends`)
        return this.#toChild(message)
      default:
        return this.#toChild(message)
    }
  }

  /**
   * A frame's text chunks: a child's come before anything else of it in the frame (the runner
   * adds none after another message of it), so they reach it in order as one events message.
   */
  #texts(texts: string[]): void {
    if (texts.length % 2 !== 0) return this.violation(`a 'texts' message of ${texts.length} items (a child and a text each)`)
    const byChild = new Map<string, string[]>()
    for (let i = 0; i < texts.length; i += 2) {
      const events = byChild.get(texts[i]!)
      if (events) events.push(texts[i + 1]!)
      else byChild.set(texts[i]!, [texts[i + 1]!])
    }
    for (const [child, events] of byChild) if (this.#reading) this.#toChild({ type: 'events', child, events }, 'texts')
  }

  /** A message about one child, to it; `sentAs` names what the runner sent (a texts message is made into events). */
  #toChild(message: Extract<RunnerMessage, { child: string }>, sentAs: RunnerMessage['type'] = message.type): void {
    const child = this.#children.get(message.child)
    if (child) return child.receive(message)
    if (this.#dropping.has(message.child)) {
      // Its runner let it go: after the drop, or by a last word of its own that crossed the drop.
      if (lastWord(message)) this.#dropping.delete(message.child)
      return
    }
    this.violation(`a '${sentAs}' message for a child it does not host`)
  }
}

/** A runner message after which the runner holds the child no more. */
function lastWord(message: Extract<RunnerMessage, { child: string }>): boolean {
  switch (message.type) {
    case 'dropped':
    case 'create-failed':
    case 'failed':
    case 'idle':
      return true
    case 'ended':
      // A movable one is held on its node until the host's word (the drop, here).
      return !message.movable
    default:
      return false
  }
}
