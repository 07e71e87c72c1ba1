/**
 * A node's link to one host: the node's half of the handshake, the children it asks the host for
 * (or the host places on it directly) and runs for it, its room as told to the host, and the
 * host's liveness. A job names a child; what the child is comes only from the host, as the
 * `create` it answers a `take` with, or one no take asked for: a placement, which the node builds
 * if it has room. The host pings every link it holds, so a host silent for
 * `hostSilenceMs` (by the node's SilenceJudge) is gone (killed, or cut off): its children are let go, since nobody is left to read them.
 */
import { setMaxListeners } from 'node:events'
import { Outbox } from '../protocol/outbox.js'
import { childOf, flatEvents, PROTOCOL_VERSION, type HostMessage, type RunnerConfig, type RunnerMessage } from '../protocol/messages.js'
import { isHostFrame } from '../protocol/validators.js'
import { toWireError } from '../protocol/shapes/error.js'
import { ProtocolError } from '../protocol/validate.js'
import type { Fault } from '../parent/runners/channel.js'
import type { RunnerHooks } from '../parent/runners/move-point.js'
import type { Mark, SilenceJudge } from '../parent/runners/liveness.js'
import type { HostEnd, RelayedChild } from './relayed-child.js'
import type { CreateMessage, RoomMessage, TakeMessage } from './envelope.js'
import { subagentError, versionMismatchText } from '../protocol/errors.js'

/** What a node says to a host: a runner's messages, its takes and its room. */
export type NodeMessage = RunnerMessage | TakeMessage | RoomMessage

/**
 * What the host gave this node for a job: the child to build, and a signal aborted if the host
 * lets go of it (or the link ends) before it is on a thread. The child's own: the link aborts it
 * when it ends, where `AbortSignal.any` with the link's signal would leave an entry in that
 * long-lived signal for every child (Node 20 never frees them).
 */
export interface Taken {
  create: CreateMessage
  signal: AbortSignal
}

/** A node's room at one level: how many more children it would take, and how many of the host's placements it had counted then. */
interface Room {
  free: number
  placed: number
}

/** A child this node asked the host for, until it is on a thread: asked, then given (the create arrived). */
interface Taking {
  given: boolean
  readonly stop: AbortController
  answer(answer: CreateMessage | 'refused' | 'unanswered'): void
}

/**
 * What became of a take: the child to build; `'refused'`, the host's answer (it gave up on the
 * child, never queued it, or another node holds the job); or `'unanswered'`, the link ended
 * first, and the host may never have heard it.
 */
export type TakeAnswer = Taken | 'refused' | 'unanswered'

export interface HostLinkOptions {
  /** This link's own id, in the envelope of every frame on it (see envelope.ts). */
  id: string
  host: string
  /** Names this node: 'node <id>'. */
  label: string
  send(frame: NodeMessage[]): void
  /** The node's judge of its hosts' silence: the link marks each frame it hears by its clock. */
  judge: SilenceJudge
  /** The depth level a child of `depth` is counted at (the broker's). */
  levelOf(depth: number | undefined): number
  /** The host placed a child here directly: the node builds it if it has room at `level`, else refuses it (createFailed). */
  placed(taken: Taken, level: number, link: HostLink): void
  /** The link is over: the node forgets it. */
  ended(link: HostLink): void
}

export class HostLink implements HostEnd {
  readonly id: string
  readonly host: string
  readonly label: string
  /** The host's welcome: its config. Rejects when the link ends first. */
  readonly welcome: Promise<RunnerConfig>
  readonly #options: HostLinkOptions
  readonly #outbox: Outbox<NodeMessage>
  readonly #taking = new Map<string, Taking>()
  readonly #children = new Map<string, RelayedChild>()
  readonly #stop = new AbortController()
  /** By level: the children the host placed here directly (refused or not), the room it was last told, and the room it is yet to be told. */
  readonly #placements = new Map<number, number>()
  readonly #roomTold = new Map<number, Room>()
  readonly #roomDue = new Map<number, Room>()
  /** The host was told its module's hooks (the `ready` a thread gives its own host). */
  #ready = false
  /** When the host was last heard (or the link opened), by the judge's clock. */
  #heard: Mark
  #ended = false
  /** The host's welcome came: it heard this link's hello, and reads what is sent on it. */
  #welcomed = false
  #resolveWelcome!: (config: RunnerConfig) => void
  #rejectWelcome!: (error: Error) => void

  constructor(options: HostLinkOptions) {
    this.id = options.id
    this.host = options.host
    this.label = options.label
    this.#options = options
    // Its children moving at once each follow it while they wait for a thread (placeUntil, node.ts).
    setMaxListeners(0, this.#stop.signal)
    this.#heard = options.judge.mark()
    this.welcome = new Promise((resolve, reject) => ((this.#resolveWelcome = resolve), (this.#rejectWelcome = reject)))
    this.welcome.catch(() => {})
    this.#outbox = new Outbox<NodeMessage>({
      send: (frame) => options.send(flatEvents(frame)),
      ownerOf: childOf,
      unsendable: (message, error) => this.#children.get(childOf(message) ?? '')?.end({ stopReason: 'error', diagnostic: `a '${message.type}' message could not be sent by ${this.label}: ${String(error)}` }),
      riders: () => this.#roomWords(),
    })
    this.#outbox.push({ type: 'hello', v: PROTOCOL_VERSION })
  }

  get ended(): boolean {
    return this.#ended
  }

  /** Whether the host welcomed this link: until then it may not have heard its hello, and would read nothing more on it. */
  get welcomed(): boolean {
    return this.#welcomed
  }

  /** Aborted when the link ends: a child still waiting for a slot stops waiting. */
  get signal(): AbortSignal {
    return this.#stop.signal
  }

  /** Ends every child now with `fault` (the node is shutting down); the host hears it. */
  endAll(fault: Fault): void {
    for (const child of [...this.#children.values()]) child.end(fault)
  }

  send(message: RunnerMessage): void {
    this.#outbox.push(message)
  }

  /**
   * A thread of this host's module said which hooks it has: the host is told once, so it judges
   * a child of this node as it would one of its own threads (CONTRACT.md §8). One link serves one
   * host, and so one agent module (its config's): whichever of the node's modules another host uses has its own link.
   */
  ready(hooks: RunnerHooks): void {
    if (this.#ready || hooks === undefined) return
    this.#ready = true
    this.#outbox.push({ type: 'ready', hooks: [...hooks] })
  }

  /**
   * Asks the host for the child a job names, telling it the job's lock token as proof this node
   * holds the job. A child asked for already on this link is not this job's to run: refused.
   */
  take(child: string, token: string): Promise<TakeAnswer> {
    if (this.#ended) return Promise.resolve('unanswered')
    if (this.#taking.has(child)) return Promise.resolve('refused')
    return new Promise((resolve) => {
      const stop = new AbortController()
      this.#taking.set(child, { given: false, stop, answer: (answer) => resolve(typeof answer === 'string' ? answer : { create: answer, signal: stop.signal }) })
      this.#outbox.push({ type: 'take', child, token })
    })
  }

  /**
   * The node's room at `level` is now `free`: the host hears it with the placements of it counted
   * so far, the latest word a level in a frame. More room goes at the end of this turn; less rides
   * the next frame sent anyway (the host counts its own placements, so only other hosts' and the
   * queue's would be news), and a word that changes nothing is not said.
   */
  room(level: number, free: number): void {
    if (this.#ended) return
    this.#roomDue.set(level, { free, placed: this.#placements.get(level) ?? 0 })
    if (free > (this.#roomTold.get(level)?.free ?? -1)) this.#outbox.nudge()
  }

  /** The room words due go at the end of this turn, news or not (the node is shutting down: its hosts should stop placing children on it). */
  sayRoomNow(): void {
    if (!this.#ended) this.#outbox.nudge()
  }

  /** The room words due: ridden on the frame being sent. */
  #roomWords(): RoomMessage[] {
    const words: RoomMessage[] = []
    for (const [level, room] of this.#roomDue) {
      const told = this.#roomTold.get(level)
      if (told?.free === room.free && told.placed === room.placed) continue
      this.#roomTold.set(level, room)
      words.push({ type: 'room', level, ...room })
    }
    this.#roomDue.clear()
    return words
  }

  /** A child given by the host could not be built here: the host hears why. */
  createFailed(child: string, error: unknown): void {
    this.#taking.delete(child)
    this.#outbox.push({ type: 'create-failed', child, error: toWireError(error) })
  }

  adopt(child: RelayedChild): void {
    this.#taking.delete(child.id)
    this.#children.set(child.id, child)
  }

  forget(child: RelayedChild): void {
    if (this.#children.get(child.id) === child) this.#children.delete(child.id)
  }

  receive(frame: unknown): void {
    if (this.#ended) return
    this.#heard = this.#options.judge.mark()
    if (!isHostFrame(frame)) return this.#fatal(new ProtocolError(`the host sent a malformed frame: ${isHostFrame.explain(frame, 'frame')}`))
    for (const message of frame) if (!this.#ended) this.#dispatch(message)
  }

  /** When the host was last heard: the node's judge ends the link when that is too long ago. */
  get heard(): Mark | undefined {
    return this.#ended ? undefined : this.#heard
  }

  /**
   * The host is gone or done: its children are let go, and nothing more is sent to it. A take
   * still waiting is `unanswered` (the host may never have heard it), unless the host `refused`
   * the link itself.
   */
  close(why: string, takes: 'refused' | 'unanswered' = 'unanswered'): void {
    if (this.#ended) return
    this.#ended = true
    this.#rejectWelcome(subagentError('ERR_SUBAGENT_LINK_ENDED', `the link to host ${this.host} ended before it welcomed ${this.label}: ${why}`))
    const ended = subagentError('ERR_SUBAGENT_LINK_ENDED', `the link to host ${this.host} ended: ${why}`)
    this.#stop.abort(ended)
    this.#outbox.close()
    // Each child given and not yet on a thread stops waiting for one, with the link's reason.
    for (const taking of this.#taking.values()) {
      taking.stop.abort(ended)
      taking.answer(takes)
    }
    this.#taking.clear()
    for (const child of [...this.#children.values()]) child.abandon()
    this.#options.ended(this)
  }

  #dispatch(message: HostMessage): void {
    switch (message.type) {
      case 'welcome':
        if (message.v !== PROTOCOL_VERSION) {
          return this.#fatal(new ProtocolError(versionMismatchText('the host', message.v, this.label, PROTOCOL_VERSION)))
        }
        this.#welcomed = true
        return this.#resolveWelcome(message.config)
      case 'ping':
        return this.#outbox.push({ type: 'pong', n: message.n })
      case 'bye':
        // Before its welcome, a bye is the host refusing the link (it speaks another protocol
        // version): it heard the hello and the takes with it, and will take none of them. Sent
        // round again, each would only be refused again.
        return this.#welcomed ? this.close('the host said bye') : this.close('the host refused the link (a host of another protocol version?)', 'refused')
      case 'create': {
        // A child whose thread went, rebuilt by the host from its copy: on another thread of this node.
        const held = this.#children.get(message.child)
        if (held) return held.held ? held.fromHost(message) : this.#fatal(new ProtocolError(`the host sent a create message for child ${message.child}, which ${this.label} runs already`))
        return this.#taking.has(message.child) ? this.#given(message) : this.#placed(message)
      }
      case 'drop':
        if (this.#taking.has(message.child)) return this.#dropTaken(message.child)
        return this.#children.get(message.child)?.fromHost(message)
      default:
        // A message for a child that already left needs nothing.
        this.#children.get(message.child)?.fromHost(message)
    }
  }

  /** The host's answer to a take: the child to build. A second create for it is a broken host. */
  #given(create: CreateMessage): void {
    const taking = this.#taking.get(create.child)!
    if (taking.given) return this.#fatal(new ProtocolError(`the host sent a second create message for child ${create.child}`))
    taking.given = true
    taking.answer(create)
  }

  /** A create no take asked for: the host placed the child here directly. Until it is on a thread, a drop lets it go as it would a taken one. */
  #placed(create: CreateMessage): void {
    const level = this.#options.levelOf(create.spec.header.delegationDepth)
    this.#placements.set(level, (this.#placements.get(level) ?? 0) + 1)
    const stop = new AbortController()
    this.#taking.set(create.child, { given: true, stop, answer: () => {} })
    this.#options.placed({ create, signal: stop.signal }, level, this)
  }

  /** The host refused a take, or let go of a child it gave before the child reached a thread. */
  #dropTaken(child: string): void {
    const taking = this.#taking.get(child)!
    this.#taking.delete(child)
    if (!taking.given) return taking.answer('refused')
    taking.stop.abort(subagentError('ERR_SUBAGENT_LINK_ENDED', 'the host let go of the child'))
    this.#outbox.push({ type: 'dropped', child })
  }

  /** The host broke the protocol: it hears why, and the link ends. */
  #fatal(error: Error): void {
    this.#outbox.push({ type: 'fatal', error: toWireError(error) })
    this.#outbox.flush()
    this.close(error.message)
  }
}
