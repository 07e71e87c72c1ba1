/**
 * A node's link to one host: the node's half of the handshake, the children it asks the host for
 * and runs for it, and the host's liveness. A job names a child; what the child is comes only from
 * the host, as the `create` it answers a `take` with. The host pings every link it holds, so a host silent for
 * `hostSilenceMs` (by the node's SilenceJudge) is gone (killed, or cut off): its children are let go, since nobody is left to read them.
 */
import { Outbox } from '../protocol/outbox.js'
import { childOf, PROTOCOL_VERSION, type HostMessage, type RunnerConfig, type RunnerMessage } from '../protocol/messages.js'
import { isHostFrame } from '../protocol/validators.js'
import { toWireError } from '../protocol/shapes/error.js'
import { ProtocolError } from '../protocol/validate.js'
import type { Fault } from '../parent/runners/channel.js'
import type { RunnerHooks } from '../parent/runners/move-point.js'
import type { Mark, SilenceJudge } from '../parent/runners/liveness.js'
import type { HostEnd, RelayedChild } from './relayed-child.js'
import type { CreateMessage, TakeMessage } from './envelope.js'
import { subagentError, versionMismatchText } from '../protocol/errors.js'

/** What a node says to a host: a runner's messages, and its takes. */
export type NodeMessage = RunnerMessage | TakeMessage

/** What the host gave this node for a job: the child to build, and a signal aborted if the host lets go of it (or the link ends) before it is on a thread. */
export interface Taken {
  create: CreateMessage
  signal: AbortSignal
}

/** A child this node asked the host for, until it is on a thread: asked, then given (the create arrived). */
interface Taking {
  given: boolean
  readonly stop: AbortController
  answer(create: CreateMessage | undefined): void
}

export interface HostLinkOptions {
  host: string
  /** Names this node: 'node <id>'. */
  label: string
  send(frame: NodeMessage[]): void
  /** The node's judge of its hosts' silence: the link marks each frame it hears by its clock. */
  judge: SilenceJudge
  /** The link is over: the node forgets it. */
  ended(link: HostLink): void
}

export class HostLink implements HostEnd {
  readonly host: string
  readonly label: string
  /** The host's welcome: its config. Rejects when the link ends first. */
  readonly welcome: Promise<RunnerConfig>
  readonly #options: HostLinkOptions
  readonly #outbox: Outbox<NodeMessage>
  readonly #taking = new Map<string, Taking>()
  readonly #children = new Map<string, RelayedChild>()
  readonly #stop = new AbortController()
  /** The host was told its module's hooks (the `ready` a thread gives its own host). */
  #ready = false
  /** When the host was last heard (or the link opened), by the judge's clock. */
  #heard: Mark
  #ended = false
  #welcomed!: (config: RunnerConfig) => void
  #refused!: (error: Error) => void

  constructor(options: HostLinkOptions) {
    this.host = options.host
    this.label = options.label
    this.#options = options
    this.#heard = options.judge.mark()
    this.welcome = new Promise((resolve, reject) => ((this.#welcomed = resolve), (this.#refused = reject)))
    this.welcome.catch(() => {})
    this.#outbox = new Outbox<NodeMessage>({
      send: options.send,
      ownerOf: childOf,
      unsendable: (message, error) => this.#children.get(childOf(message) ?? '')?.end({ stopReason: 'error', diagnostic: `a '${message.type}' message could not be sent by ${this.label}: ${String(error)}` }),
    })
    this.#outbox.push({ type: 'hello', v: PROTOCOL_VERSION })
  }

  get ended(): boolean {
    return this.#ended
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
   * holds the job. Resolves with what the host gave, or undefined when it refused (it gave up on
   * the child, never queued it, or another node holds the job) or the link ended.
   */
  take(child: string, token: string): Promise<Taken | undefined> {
    if (this.#ended || this.#taking.has(child)) return Promise.resolve(undefined)
    return new Promise((resolve) => {
      const stop = new AbortController()
      const signal = AbortSignal.any([stop.signal, this.#stop.signal])
      this.#taking.set(child, { given: false, stop, answer: (create) => resolve(create && { create, signal }) })
      this.#outbox.push({ type: 'take', child, token })
    })
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

  /** The host is gone or done: its children are let go, and nothing more is sent to it. */
  close(why: string): void {
    if (this.#ended) return
    this.#ended = true
    this.#refused(subagentError('ERR_SUBAGENT_LINK_ENDED', `the link to host ${this.host} ended before it welcomed ${this.label}: ${why}`))
    this.#stop.abort(subagentError('ERR_SUBAGENT_LINK_ENDED', `the link to host ${this.host} ended: ${why}`))
    this.#outbox.close()
    for (const taking of this.#taking.values()) taking.answer(undefined)
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
        return this.#welcomed(message.config)
      case 'ping':
        return this.#outbox.push({ type: 'pong', n: message.n })
      case 'bye':
        return this.close('the host said bye')
      case 'create': {
        // A child whose thread went, rebuilt by the host from its copy: on another thread of this node.
        const held = this.#children.get(message.child)
        return held?.held ? held.fromHost(message) : this.#given(message)
      }
      case 'drop':
        if (this.#taking.has(message.child)) return this.#dropTaken(message.child)
        return this.#children.get(message.child)?.fromHost(message)
      default:
        // A message for a child that already left needs nothing.
        this.#children.get(message.child)?.fromHost(message)
    }
  }

  /** The host's answer to a take: the child to build. A create nobody asked for is a broken host. */
  #given(create: CreateMessage): void {
    const taking = this.#taking.get(create.child)
    if (!taking || taking.given) return this.#fatal(new ProtocolError(`the host sent a create message for child ${create.child}, which ${this.label} did not ask for`))
    taking.given = true
    taking.answer(create)
  }

  /** The host refused a take, or let go of a child it gave before the child reached a thread. */
  #dropTaken(child: string): void {
    const taking = this.#taking.get(child)!
    this.#taking.delete(child)
    if (!taking.given) return taking.answer(undefined)
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
