/**
 * The host's link to one node: a runner channel carried over a broker (Redis, in src/bullmq). A node runs the children it
 * took from the queue on its own threads; to the host it is one runner with many children, and,
 * like a thread, nothing it sends is trusted (the channel checks every frame, each child every
 * message, and a message about a child not given to this node is a violation).
 *
 * A child is given to a node only on its `take` (see envelope.ts), which the transport answers: the
 * `create` over this link, or a `drop`. So a client that merely reads the job and speaks of the
 * child (`created`, `events`, `idle`) has spoken of a child it does not host, and is given up on.
 * Or the host places it here directly, with a `create` no take asked for, while the node has
 * room by its own last word (`room`), less the children placed on it since that it had not yet
 * counted; a node with none after all builds nothing and says so (`create-failed`,
 * ERR_SUBAGENT_NODE_FULL), and the child is queued. Only on a node that proved itself first, by
 * a take the transport accepted (it held a job's lock, as the job's processor): any client of the
 * broker can say hello and claim room, and would otherwise be handed children no job gave it
 * (one that runs a broker worker itself can prove itself: see docs/design.md).
 *
 * The host cannot see a node die: a heartbeat it leaves unanswered for `nodeSilenceMs` (by the
 * transport's SilenceJudge) is its death.
 * Stopping the link ends its children and says `bye`, so a node that is merely cut off lets go of
 * them too once it hears again (or notices the host's silence first).
 */
import { RunnerChannel, type Culprit, type Fault, type RunnerKind } from '../parent/runners/channel.js'
import type { HostMessage, RunnerConfig } from '../protocol/messages.js'
import type { Mobility } from '../parent/runners/move-point.js'
import { placementsOf, type RoomMessage, type TakeMessage } from './envelope.js'

const KIND: RunnerKind = { noun: 'node', ended: 'given up on', relays: true }

/** A node's room at one level, as this host knows it. */
interface Room {
  /** The node's last word: how many more it would take. */
  free: number
  /** How many of this host's placements it had counted then. */
  counted: number
  /** How many this host placed on it directly. */
  placed: number
}

export interface NodeLinkOptions {
  /** The node's id for this link, from its hello's envelope: every frame to it is sent with it (see envelope.ts). */
  id: string
  node: string
  config: RunnerConfig
  send(frame: HostMessage[]): void
  /** The node asks for a child it took from the queue: the transport gives it (a create on `channel`) or refuses it. */
  take(take: TakeMessage, link: NodeLink): void
  ended(link: NodeLink): void
}

export class NodeLink {
  readonly id: string
  readonly node: string
  readonly channel: RunnerChannel
  readonly #options: NodeLinkOptions
  readonly #rooms = new Map<number, Room>()
  /** A take of it was accepted: its word on its room is believed. */
  #proven = false
  #ended = false

  constructor(options: NodeLinkOptions) {
    this.id = options.id
    this.node = options.node
    this.#options = options
    this.channel = new RunnerChannel({
      kind: KIND,
      label: `node ${options.node}`,
      config: options.config,
      send: options.send,
      kill: (fault, culprit) => this.stop(fault, culprit),
      crashed: (error) => this.stop({ stopReason: 'error', diagnostic: `node ${options.node} crashed: ${error.message}` }),
      changed: () => {},
    })
  }

  get ended(): boolean {
    return this.#ended
  }

  /** A frame from the node: its runner messages go to the channel first (the hello opens it), then its room is noted and its takes go to the transport. */
  receive(frame: unknown): void {
    const { takes, rooms, rest } = placementsOf(frame)
    const placementsOnly = rest !== frame && (rest as unknown[]).length === 0
    if (!placementsOnly) this.channel.receive(rest)
    for (const room of rooms) this.#told(room)
    for (const take of takes) if (!this.#ended) this.#options.take(take, this)
  }

  /** The node held a job it took, by the broker's lock: from now on its room is believed. */
  proven(): void {
    this.#proven = true
  }

  /** How many more children of `level` the node would take now, as far as this host knows: none until it proved itself. */
  room(level: number): number {
    const room = this.#rooms.get(level)
    if (this.#ended || !this.#proven || !room) return 0
    return Math.max(0, room.free - (room.placed - room.counted))
  }

  /** A child of `level` is placed on the node directly (its create goes out now). */
  placed(level: number): void {
    const room = this.#rooms.get(level)
    if (room) room.placed++
  }

  /** The node had no room for a child placed on it: none is counted on until it says so again. */
  full(level: number): void {
    const room = this.#rooms.get(level)
    if (room) room.free = 0
  }

  /** The node's word on its room; the placements it counts are at most those made. */
  #told({ level, free, placed }: RoomMessage): void {
    const room = this.#rooms.get(level)
    if (!room) return void this.#rooms.set(level, { free, counted: 0, placed: 0 })
    room.free = free
    room.counted = Math.min(placed, room.placed)
  }

  /**
   * The node may not have the child it asked for: it lets its job go without building anything.
   * Not a child running on this link: no node takes a child it runs, so that take was posed by
   * another client (the link's id and the node's are read off Redis), and a drop would end the child.
   */
  refuse(child: string): void {
    if (this.channel.hosts(child)) return
    this.channel.send({ type: 'drop', child })
  }

  /**
   * The heartbeat's verdict (see SilenceJudge): the node left a ping unanswered for `silentMs`, so
   * it is gone. `movable`: another node can take its children, so those a host call held move
   * (CONTRACT.md §10); the node's last frames may be lost, so no other child does.
   */
  silent(silentMs: number, why: string, movable = false): void {
    const gone = `node ${this.node} stopped answering for ${Math.round(silentMs)} ms (${why})`
    const diagnostic = movable ? `${gone}: its children waiting on the host were placed again, the others given up` : `${gone}, so its children were given up`
    this.stop({ stopReason: 'error', diagnostic }, undefined, movable ? 'held' : undefined)
  }

  /**
   * The node opened another link to this host: it ends a link only by letting go of the link's
   * children (see host-link.ts), so those a host call held move, onto its new link or another node;
   * its last frames on the old link may be lost, so no other child does.
   */
  relinked(): void {
    const diagnostic = `node ${this.node} opened another link to this host, so the one its children were on had ended: its children waiting on the host were placed again, the others given up`
    this.stop({ stopReason: 'error', diagnostic }, undefined, 'held')
  }

  /** Ends every child on the node with `fault` (the culprit with its own), or moves it as `movable` allows, and tells the node to let them go. */
  stop(fault: Fault, culprit?: Culprit, movable?: Mobility): void {
    if (this.#ended) return
    this.#ended = true
    this.#options.send([{ type: 'bye' }])
    this.channel.end(fault, culprit, movable)
    this.#options.ended(this)
  }
}
