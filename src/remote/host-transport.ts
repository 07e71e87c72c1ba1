/**
 * The host's side of a remote transport, whatever the broker: children run on worker nodes
 * (`subagent-worker node`), placed directly on one with room or taken from a queue, one job per
 * child. The broker (see broker.ts; BullMQ on Redis in src/bullmq) keeps the queue and carries
 * the bytes.
 *
 *   direct     a node linked to this host tells it its room (`room`, see node-link.ts), believed
 *              once the node proved itself by a take; a start goes to the node with the most, as
 *              a create over its link, with no job, and waits for its `created` as a taken child does. A node that had no room after all built
 *              nothing and says so (ERR_SUBAGENT_NODE_FULL): the start is queued. One that falls
 *              silent meanwhile may have built it, so the start fails, as a taken one does.
 *   queued     with no node's room known, a job naming the child (and this host) waits in the queue of its depth (the broker's
 *              waiting list is the back-pressure) until a node takes it. The node then asks for
 *              the child (`take`, with the job's lock token): the first node that holds the job's
 *              lock is given it, its create message sent over that node's link, and the run goes
 *              on as on any runner (created, publish, events, rpc ...). The job carries no spec:
 *              what a child is comes from this host only.
 *   abort      while queued, the job is removed; if a node took it meanwhile, its take is
 *              refused and the node lets the job go. After publication, as on threads: a
 *              cooperative cancel, then the node terminates the thread after abortGraceMs.
 *   no node    a start still queued after `placementTimeoutMs` fails if no live node serves its
 *              queue (asked of the broker then, and again each `placementTimeoutMs` it waits on);
 *              one waiting behind busy nodes waits on, the queue being the back-pressure.
 *   failures   a node that stops answering the heartbeat is given up on within `nodeSilenceMs`;
 *              a broker command that does not answer in its bound (`redisTimeoutMs`) fails the start
 *              that waits on it (BullMQ and ioredis would retry forever); a dropped broker connection
 *              ends every link, since pub/sub may have lost frames while it was down.
 */
import { randomUUID } from 'node:crypto'
import type { ChildSpec } from '../protocol/shapes/child.js'
import { PROTOCOL_VERSION, type HostMessage } from '../protocol/messages.js'
import { SilenceJudge } from '../parent/runners/liveness.js'
import type { RunnerChannel } from '../parent/runners/channel.js'
import { RemoteChild, type Replace } from '../parent/runners/remote-child.js'
import type { ChildHandle, ChildMirror, ChildTransport, Transport, TransportContext } from '../parent/transport.js'
import { NodeLink } from './node-link.js'
import { levelOf, type HostBroker, type OpenHostBroker, type QueuedJob } from './broker.js'
import { childJob, decode, encode, placementsOf, type TakeMessage } from './envelope.js'
import { CLOSED_BEFORE_END, closedWhileWaiting, hostClosed, noNodeServes, notBuilt, subagentError, versionMismatchText } from '../protocol/errors.js'

export interface RemoteHostSettings {
  /** How long a node may leave the heartbeat unanswered before its children end `error`. */
  nodeSilenceMs: number
  /** How long a start may wait in a queue no live node serves before it fails. */
  placementTimeoutMs: number
}

/** How often links are pinged and their silence judged. */
export const HEARTBEAT_MS = 500

/**
 * How often queued starts are checked for a job that vanished: a node that died after taking the
 * job and before saying a word has its job failed by the broker's stall check (and removed), and
 * the start would otherwise wait forever.
 */
const SWEEP_MS = 5000

/** Whether a frame opens a link: its first message is a hello. */
function isHello(frame: unknown): frame is [{ type: 'hello'; v?: unknown }, ...unknown[]] {
  if (!Array.isArray(frame)) return false
  const first: unknown = frame[0]
  return typeof first === 'object' && first !== null && (first as { type?: unknown }).type === 'hello'
}

/** A node enforces the grace itself; the host steps in only if the node does not, this much later. */
const NODE_GRACE_MARGIN_MS = 3000

/** A transport for `createHost({ transport })` over the broker `open` makes: `name` is the adapter's (its factory is `<name>Transport()`). */
export function remoteTransport(name: string, settings: RemoteHostSettings, open: OpenHostBroker): Transport {
  let opened = false
  return {
    name,
    open(context) {
      if (opened) throw subagentError('ERR_SUBAGENT_TRANSPORT_REUSED', `a ${name}Transport() serves one host: make one per createHost()`)
      opened = true
      return new RemoteHostTransport(settings, context, open)
    },
  }
}

/** A child waiting in the queue for a node to take it: a start, or a child moved off a node that died. */
interface Queued {
  spec: ChildSpec
  /** Its depth level (the broker's). */
  level: number
  job: QueuedJob | undefined
  /** Sweeps in a row that found its job lost while no node had spoken of the child. */
  missing: number
  /** When it began to wait (performance.now()). */
  since: number
  /** When the broker is next asked whether a live node serves the queue. */
  watch: NodeJS.Timeout | undefined
  /** A node holding its job took it: the child is built over that node's link, now. */
  claimed(channel: RunnerChannel): void
  failed(error: unknown): void
}

/** The host's transport over a broker: `open` makes the broker for this host's id. */
class RemoteHostTransport implements ChildTransport {
  readonly local = false
  /** This host's address on the broker. */
  readonly #id = randomUUID()
  readonly #settings: RemoteHostSettings
  readonly #context: TransportContext
  readonly #broker: HostBroker
  readonly #links = new Map<string, NodeLink>()
  readonly #queued = new Map<string, Queued>()
  /** How many starts wait in the queue, by level: while any does, a new start of that level queues behind it. */
  readonly #queuedAt = new Map<number, number>()
  readonly #heartbeat: NodeJS.Timeout
  readonly #judge: SilenceJudge
  readonly #sweep: NodeJS.Timeout
  #sweeping = false
  #closing: Promise<void> | undefined

  constructor(settings: RemoteHostSettings, context: TransportContext, open: OpenHostBroker) {
    this.#settings = settings
    this.#context = context
    this.#broker = open(this.#id, { receive: (bytes) => this.#receive(bytes), lost: (why) => this.#connectionLost(why) })
    this.#judge = new SilenceJudge({ limitMs: settings.nodeSilenceMs, intervalMs: HEARTBEAT_MS })
    this.#heartbeat = setInterval(() => this.#check(), HEARTBEAT_MS).unref()
    this.#sweep = setInterval(() => void this.#sweepQueued(), SWEEP_MS).unref()
  }

  async create(spec: ChildSpec, mirror: ChildMirror, signal: AbortSignal): Promise<ChildHandle> {
    const placement = this.#context.placement(spec.id)
    // A child moved off a node that died (CONTRACT.md §10) is queued again, for another node.
    const replace: Replace = async (moving, build) => void (await this.#enqueue(spec, moving, build))
    const options = { placement, graceMs: this.#context.abortGraceMs, graceMarginMs: NODE_GRACE_MARGIN_MS, replace }
    const build = (channel: RunnerChannel) => new RemoteChild(spec, mirror, channel, options)
    const placed = await this.#placeDirectly(spec, signal, build)
    if (placed) return placed
    const child = await this.#enqueue(spec, signal, build)
    await this.#built(child, signal)
    return child
  }

  /**
   * Waits for the node's `created`, at most `placementTimeoutMs`: a node given a child that
   * builds nothing (answering its pings all the while, so its silence never ends it) would
   * otherwise hold the start for good. The child is let go, and the start fails.
   */
  async #built(child: RemoteChild, signal: AbortSignal): Promise<void> {
    const { placementTimeoutMs } = this.#settings
    // One signal for both ends, made by hand: AbortSignal.any would tie one more signal to a
    // caller's, which may be long-lived and shared by every start.
    const bound = new AbortController()
    const follow = () => bound.abort(signal.reason)
    if (signal.aborted) follow()
    else signal.addEventListener('abort', follow, { once: true })
    const timer = setTimeout(() => bound.abort(notBuilt(placementTimeoutMs)), placementTimeoutMs)
    try {
      await child.created(bound.signal)
    } finally {
      clearTimeout(timer)
      signal.removeEventListener('abort', follow)
    }
  }

  /**
   * Builds the child on the linked node with the most room at its level, with no job; undefined
   * when none has room, when starts of its level wait in the queue already (it does not pass
   * them), or when the node chosen had none after all (it built nothing: the child is queued).
   */
  async #placeDirectly(spec: ChildSpec, signal: AbortSignal, build: (channel: RunnerChannel) => RemoteChild): Promise<RemoteChild | undefined> {
    this.#mayStart(signal)
    const level = levelOf(spec.header.delegationDepth, this.#broker.levels)
    if ((this.#queuedAt.get(level) ?? 0) > 0) return undefined
    const link = this.#roomiest(level)
    if (!link) return undefined
    link.placed(level)
    const child = build(link.channel)
    try {
      await this.#built(child, signal)
      return child
    } catch (error) {
      if (signal.aborted) throw signal.reason
      if (this.#closing || (error as { code?: unknown } | undefined)?.code !== 'ERR_SUBAGENT_NODE_FULL') throw error
      link.full(level)
      return undefined
    }
  }

  /** The linked node with the most room at `level`, if any has room. */
  #roomiest(level: number): NodeLink | undefined {
    let roomiest: NodeLink | undefined
    let most = 0
    for (const link of this.#links.values()) {
      const room = link.room(level)
      if (room > most) [roomiest, most] = [link, room]
    }
    return roomiest
  }

  /** A start may go on: the host is not closing, and the start was not aborted. */
  #mayStart(signal: AbortSignal): void {
    if (this.#closing) throw hostClosed('start more subagents')
    if (signal.aborted) throw signal.reason
  }

  /** Queues a job for the child and waits for a node holding it to take it; `build` makes the child on that node's link. */
  async #enqueue<T>(spec: ChildSpec, signal: AbortSignal, build: (channel: RunnerChannel) => T): Promise<T> {
    this.#mayStart(signal)
    // Nodes answer on this host's channel: it must be listened to before any node can learn of it.
    await this.#broker.listening()
    // Aborted or closed while it waited for that: nothing was queued.
    this.#mayStart(signal)
    let claimed!: (channel: RunnerChannel) => void
    let failed!: (error: unknown) => void
    const taken = new Promise<T>((resolve, reject) => {
      claimed = (channel) => {
        try {
          resolve(build(channel))
        } catch (error) {
          reject(error)
        }
      }
      failed = reject
    })
    taken.catch(() => {}) // awaited below unless adding the job failed first
    const level = levelOf(spec.header.delegationDepth, this.#broker.levels)
    const queued: Queued = { spec, level, job: undefined, missing: 0, since: performance.now(), watch: undefined, claimed, failed }
    this.#queued.set(spec.id, queued)
    this.#queuedAt.set(level, (this.#queuedAt.get(level) ?? 0) + 1)
    this.#watch(queued)
    const onAbort = () => this.#giveUp(queued, signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
    try {
      queued.job = this.#broker.enqueue(spec.header.delegationDepth ?? 1, childJob(this.#id, spec.id))
      await Promise.race([queued.job.added(), taken])
      return await taken
    } catch (error) {
      this.#giveUp(queued, error)
      throw error
    } finally {
      signal.removeEventListener('abort', onAbort)
    }
  }

  close(): Promise<void> {
    return (this.#closing ??= this.#close())
  }

  async #close(): Promise<void> {
    clearInterval(this.#heartbeat)
    clearInterval(this.#sweep)
    for (const queued of [...this.#queued.values()]) this.#giveUp(queued, closedWhileWaiting('in the queue'))
    for (const link of [...this.#links.values()]) link.stop({ stopReason: 'aborted', diagnostic: CLOSED_BEFORE_END })
    await this.#broker.close()
  }

  /** The start leaves the queue (taken, or given up); false if it had left already. */
  #dequeue(queued: Queued): boolean {
    const id = queued.spec.id
    if (this.#queued.get(id) !== queued) return false
    this.#queued.delete(id)
    this.#queuedAt.set(queued.level, this.#queuedAt.get(queued.level)! - 1)
    clearTimeout(queued.watch)
    return true
  }

  /** Stops waiting for a queued start: its job is removed, or, if a node took it already, its take will be refused. */
  #giveUp(queued: Queued, reason: unknown): void {
    if (!this.#dequeue(queued)) return
    queued.failed(reason)
    // A locked job (a node took it) cannot be removed, and a gone broker answers nothing: its take is refused either way.
    queued.job?.remove()
  }

  /**
   * A node asks for a child it took from the queue. It is given the child (the create goes over its
   * link) when the child still waits and the node holds the job: the token it tells is the job's
   * lock, and the job names it as its processor. First match wins; anything else is
   * refused, so a client that read the job but did not take it gets nothing and decides nothing.
   */
  async #take({ child: id, token }: TakeMessage, link: NodeLink): Promise<void> {
    const queued = this.#queued.get(id)
    if (!queued) return link.refuse(id)
    const holds = await this.#holds(queued, token, link.node)
    if (holds instanceof Error) this.#giveUp(queued, holds)
    if (holds !== true || this.#queued.get(id) !== queued || link.ended) return link.refuse(id)
    this.#dequeue(queued)
    link.proven()
    queued.claimed(link.channel)
  }

  /** Whether `node` holds the queued child's job. An Error when the broker cannot say: the start cannot go on without knowing. */
  async #holds(queued: Queued, token: string, node: string): Promise<boolean | Error> {
    try {
      return await queued.job!.heldBy(node, token)
    } catch (error) {
      return error instanceof Error ? error : new Error(String(error))
    }
  }

  #receive(bytes: Buffer): void {
    if (this.#closing) return
    const envelope = decode(bytes)
    if (envelope instanceof Error) return // no sender to blame: a node whose frames are lost falls silent, and the heartbeat ends it
    const { from, link: id, frame } = envelope
    let link = this.#links.get(from)
    if (link && link.id !== id) {
      // Of the node's link before, sent late: not read. A hello opens the node's next link, so that one is over.
      if (!isHello(frame)) return
      link.relinked()
      link = undefined
    }
    if (!link) {
      // A link opens with the node's hello; anything else is from a link already ended.
      if (!isHello(frame)) return
      if (frame[0].v !== PROTOCOL_VERSION) return this.#refuse(from, id, frame, frame[0].v)
      link = this.#open(from, id)
    }
    link.receive(frame)
  }

  /** A node of another protocol version: the starts whose job it proves it holds fail with the reason, and it is told bye. */
  #refuse(node: string, id: string, frame: unknown, version: unknown): void {
    const error = subagentError('ERR_SUBAGENT_VERSION', versionMismatchText(`node ${node}`, version, 'this host', PROTOCOL_VERSION))
    for (const { child, token } of placementsOf(frame).takes) {
      const queued = this.#queued.get(child)
      if (queued) void this.#holds(queued, token, node).then((holds) => holds === true && this.#giveUp(queued, error))
    }
    this.#broker.send(node, encode(this.#id, id, [{ type: 'bye' }]))
  }

  #open(node: string, id: string): NodeLink {
    const link = new NodeLink({
      id,
      node,
      config: this.#context.config,
      send: (frame: HostMessage[]) => this.#broker.send(node, encode(this.#id, id, frame)),
      take: (take, from) => void this.#take(take, from),
      ended: (ended) => {
        if (this.#links.get(ended.node) === ended) this.#links.delete(ended.node)
      },
    })
    this.#links.set(node, link)
    return link
  }

  /** One heartbeat: a node that left its ping unanswered too long is gone; every other is pinged. */
  #check(): void {
    const suspects = this.#judge.check(this.#links.values(), (link) => (link.ended ? undefined : link.channel.pinged), (link, ms) => this.#silent(link, ms))
    const at = this.#judge.mark()
    for (const link of this.#links.values()) if (!suspects.has(link)) link.channel.ping(at)
  }

  /**
   * Fails the starts whose job is lost unclaimed: its node died holding it (the broker failed it
   * as stalled, never to run it again), or the broker lost it (Redis restarted without its
   * data). Two sweeps in a row, since a node's last word
   * about a child (create-failed) may still be on its way when its job is removed.
   */
  async #sweepQueued(): Promise<void> {
    if (this.#sweeping) return
    this.#sweeping = true
    try {
      await this.#sweepOnce()
    } finally {
      this.#sweeping = false
    }
  }

  async #sweepOnce(): Promise<void> {
    for (const queued of [...this.#queued.values()]) {
      // Claimed meanwhile: nothing to ask the broker.
      if (this.#queued.get(queued.spec.id) !== queued) continue
      const lost = await queued.job?.lost()
      // Not queued yet, or the broker is not answering (the start's own waits say so), or no longer waiting.
      if (lost === undefined || this.#queued.get(queued.spec.id) !== queued) continue
      queued.missing = lost ? queued.missing + 1 : 0
      if (queued.missing >= 2) {
        this.#giveUp(queued, subagentError('ERR_SUBAGENT_NODE_LOST', 'the node that took this child from the queue stopped before building it, or Redis lost the job (it was failed, its lock expired, or it is gone; a child never runs twice): start it again'))
      }
    }
  }

  #watch(queued: Queued): void {
    queued.watch = setTimeout(() => void this.#placementDue(queued), this.#settings.placementTimeoutMs)
  }

  /**
   * A start waited placementTimeoutMs: it fails if no live node serves its queue (CONTRACT.md
   * §10), else it waits on, behind busy nodes, and the broker is asked again as long again later.
   * A broker that cannot say fails nothing: the start's own waits on it report that.
   */
  async #placementDue(queued: Queued): Promise<void> {
    const served = await this.#broker.served(queued.spec.header.delegationDepth ?? 1)
    if (this.#queued.get(queued.spec.id) !== queued) return
    if (served === false) return this.#giveUp(queued, noNodeServes(this.#broker.queue, Math.round(performance.now() - queued.since), this.#settings.placementTimeoutMs))
    this.#watch(queued)
  }

  /**
   * A silent node's verdict. Its children waiting on the host move (CONTRACT.md §10) when another
   * node can take them: one linked to this host, or else one the broker says serves the queue (a
   * node that never took a job of this host is linked to none). With none, they would wait for a
   * node that may never come, and end `error` now. While the broker is asked, the judge asks again
   * each beat; the first verdict ends the link.
   */
  #silent(link: NodeLink, ms: number): void {
    const cause = this.#broker.silenceCause()
    if (this.#otherNode(link)) return link.silent(ms, cause, true)
    void this.#broker.served(1, link.node).then((served) => link.silent(ms, cause, served === true))
  }

  /** Whether another node is linked to this host. */
  #otherNode(gone: NodeLink): boolean {
    for (const link of this.#links.values()) if (link !== gone && !link.ended) return true
    return false
  }

  /** Frames may have been lost while a connection was down: every link over it is over. */
  #connectionLost(why: string): void {
    if (this.#closing) return
    const diagnostic = `${why}; frames to and from the node may have been lost, so the child was given up`
    for (const link of [...this.#links.values()]) link.stop({ stopReason: 'error', diagnostic })
  }
}
