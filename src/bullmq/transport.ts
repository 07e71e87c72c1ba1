/**
 * The host's side of the BullMQ transport: children run on worker nodes (`subagent-worker node`)
 * that take them from a BullMQ queue on Redis, one job per child.
 *
 *   start      a job naming the child (and this host) waits in the queue of its depth (BullMQ's
 *              waiting list is the back-pressure) until a node takes it. The node then asks for
 *              the child (`take`, with the job's lock token): the first node that holds the job's
 *              lock is given it, its create message sent over that node's link, and the run goes
 *              on as on any runner (created, publish, events, rpc ...). The job carries no spec:
 *              what a child is comes from this host only.
 *   abort      while queued, the job is removed; if a node took it meanwhile, its take is
 *              refused and the node lets the job go. After publication, as on threads: a
 *              cooperative cancel, then the node terminates the thread after abortGraceMs.
 *   failures   a node that stops answering the heartbeat is given up on within `nodeSilenceMs`;
 *              a Redis command that does not answer in `redisTimeoutMs` fails the start that
 *              waits on it (BullMQ and ioredis would retry forever); a dropped Redis connection
 *              ends every link, since pub/sub may have lost frames while it was down.
 */
import { randomUUID } from 'node:crypto'
import { Queue, type Job } from 'bullmq'
import type { Redis } from 'ioredis'
import type { ChildSpec } from '../protocol/shapes/child.js'
import { PROTOCOL_VERSION, type HostMessage } from '../protocol/messages.js'
import { InvalidOptionError, integerOption, MAX_TIMER_MS } from '../parent/options.js'
import { SilenceJudge } from '../parent/runners/liveness.js'
import type { RunnerChannel } from '../parent/runners/channel.js'
import { RemoteChild, type Replace } from '../parent/runners/remote-child.js'
import type { ChildHandle, ChildMirror, ChildTransport, Transport, TransportContext } from '../parent/transport.js'
import { NodeLink } from '../remote/node-link.js'
import { describeRedis, quit, redisClient, within, type RedisConnection } from './redis.js'
import { childJob, decode, encode, takesOf, type TakeMessage } from '../remote/envelope.js'
import { DEFAULT_QUEUE, hostChannel, nodeChannel, queueName, validQueueName } from './names.js'
import { CLOSED_BEFORE_END, closedWhileWaiting, hostClosed, messageOf, subagentError, versionMismatchText } from '../protocol/errors.js'

export interface BullmqTransportOptions {
  /** Where Redis is: a `redis://` or `rediss://` URL, or ioredis options (credentials and TLS pass through). */
  connection: RedisConnection
  /** The queue the nodes serve (`subagent-worker node --queue`); default 'subagent-worker'. */
  queue?: string
  /** How long a Redis command may take before whatever waits on it fails; default 5000. */
  redisTimeoutMs?: number
  /** How long a node may leave the heartbeat unanswered before its children end `error`; default 3000. */
  nodeSilenceMs?: number
}

interface Settings {
  connection: RedisConnection
  queue: string
  redisTimeoutMs: number
  nodeSilenceMs: number
}

/** A finished job leaves nothing behind in Redis; it is never retried (a child runs at most once). */
const JOB_OPTIONS = { removeOnComplete: true, removeOnFail: true, attempts: 1 } as const

/** How often links are pinged and their silence judged. */
const HEARTBEAT_MS = 500

/**
 * How often queued starts are checked for a job that vanished: a node that died after taking the
 * job and before saying a word has its job failed by BullMQ's stall check (and removed), and the
 * start would otherwise wait forever.
 */
const SWEEP_MS = 5000

/** A node enforces the grace itself; the host steps in only if the node does not, this much later. */
const NODE_GRACE_MARGIN_MS = 3000

const TRANSPORT_KEYS = new Set(['connection', 'queue', 'redisTimeoutMs', 'nodeSilenceMs'])

/** A transport for `createHost({ transport })`: children run on BullMQ worker nodes. */
export function bullmqTransport(options: BullmqTransportOptions): Transport {
  const settings = settingsOf(options)
  let opened = false
  return {
    name: 'bullmq',
    open(context) {
      if (opened) throw subagentError('ERR_SUBAGENT_TRANSPORT_REUSED', 'a bullmqTransport() serves one host: make one per createHost()')
      opened = true
      return new BullmqTransport(settings, context)
    },
  }
}

function settingsOf(options: BullmqTransportOptions): Settings {
  if (typeof options !== 'object' || options === null) throw new InvalidOptionError('bullmqTransport options', options, 'an object with a connection')
  for (const key of Object.keys(options)) {
    if (!TRANSPORT_KEYS.has(key)) throw new InvalidOptionError(key, (options as unknown as Record<string, unknown>)[key], `a known bullmqTransport option (${[...TRANSPORT_KEYS].join(', ')})`)
  }
  const { connection, queue = DEFAULT_QUEUE } = options
  if (typeof connection !== 'string' && (typeof connection !== 'object' || connection === null)) {
    throw new InvalidOptionError('connection', connection, 'a redis:// or rediss:// URL, or ioredis options ({ host, port, password, tls })')
  }
  if (!validQueueName(queue)) throw new InvalidOptionError('queue', queue, 'a queue name of 1 to 100 letters, digits, dots, dashes or underscores')
  return {
    connection,
    queue,
    redisTimeoutMs: integerOption('redisTimeoutMs', options.redisTimeoutMs, 1, MAX_TIMER_MS) ?? 5000,
    nodeSilenceMs: integerOption('nodeSilenceMs', options.nodeSilenceMs, HEARTBEAT_MS, MAX_TIMER_MS) ?? 3000,
  }
}

/** A child waiting in the queue for a node to take it: a start, or a child moved off a node that died. */
interface Queued {
  spec: ChildSpec
  job: Promise<Job> | undefined
  /** Sweeps in a row that found its job gone from Redis while no node had spoken of the child. */
  missing: number
  /** A node holding its job took it: the child is built over that node's link, now. */
  claimed(channel: RunnerChannel): void
  failed(error: unknown): void
}

class BullmqTransport implements ChildTransport {
  readonly local = false
  /** This host's address on Redis. */
  readonly #id = randomUUID()
  readonly #settings: Settings
  readonly #context: TransportContext
  readonly #publisher: Redis
  readonly #subscriber: Redis
  readonly #subscribed: Promise<unknown>
  /** By name: depths past QUEUE_DEPTHS share one. */
  readonly #queues = new Map<string, Queue>()
  readonly #links = new Map<string, NodeLink>()
  readonly #queued = new Map<string, Queued>()
  readonly #heartbeat: NodeJS.Timeout
  readonly #judge: SilenceJudge
  readonly #sweep: NodeJS.Timeout
  #lastRedisError: Error | undefined
  #sweeping = false
  #closing: Promise<void> | undefined

  constructor(settings: Settings, context: TransportContext) {
    this.#settings = settings
    this.#context = context
    this.#publisher = this.#client()
    this.#subscriber = this.#client()
    this.#subscriber.on('messageBuffer', (_channel: Buffer, bytes: Buffer) => this.#receive(bytes))
    this.#subscribed = this.#subscriber.subscribe(hostChannel(settings.queue, this.#id))
    this.#subscribed.catch(() => {}) // surfaced by every start
    this.#judge = new SilenceJudge({ limitMs: settings.nodeSilenceMs, intervalMs: HEARTBEAT_MS })
    this.#heartbeat = setInterval(() => this.#check(), HEARTBEAT_MS).unref()
    this.#sweep = setInterval(() => void this.#sweepQueued(), SWEEP_MS).unref()
  }

  async create(spec: ChildSpec, mirror: ChildMirror, signal: AbortSignal): Promise<ChildHandle> {
    const placement = this.#context.placement(spec.id)
    const graceMs = this.#context.abortGraceMs + NODE_GRACE_MARGIN_MS
    // A child moved off a node that died (CONTRACT.md §10) is queued again, for another node.
    const replace: Replace = async (moving, build) => void (await this.#enqueue(spec, moving, build))
    const child = await this.#enqueue(spec, signal, (channel) => new RemoteChild(spec, mirror, channel, { placement, graceMs, replace }))
    await child.created(signal)
    return child
  }

  /** Queues a job for the child and waits for a node holding it to take it; `build` makes the child on that node's link. */
  async #enqueue<T>(spec: ChildSpec, signal: AbortSignal, build: (channel: RunnerChannel) => T): Promise<T> {
    if (this.#closing) throw hostClosed('start more subagents')
    if (signal.aborted) throw signal.reason
    // Nodes answer on this host's channel: it must be listened to before any node can learn of it.
    await this.#redis(this.#subscribed, 'subscribe to its Redis channel')
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
    const queued: Queued = { spec, job: undefined, missing: 0, claimed, failed }
    this.#queued.set(spec.id, queued)
    const onAbort = () => this.#giveUp(queued, signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
    try {
      queued.job = this.#queue(spec.header.delegationDepth ?? 1).add('child', childJob(this.#id, spec.id), JOB_OPTIONS)
      queued.job.catch(() => {})
      await Promise.race([this.#redis(queued.job, 'add the child to the queue'), taken])
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
    const bound = this.#settings.redisTimeoutMs
    await Promise.allSettled([...this.#queues.values()].map((queue) => within(queue.close(), bound, () => 'queue close timed out')))
    // QUIT answers after every command sent before it: the last frames (bye) reach Redis first.
    await Promise.all([quit(this.#publisher, bound), quit(this.#subscriber, bound)])
  }

  /** Stops waiting for a queued start: its job is removed, or, if a node took it already, its take will be refused. */
  #giveUp(queued: Queued, reason: unknown): void {
    const id = queued.spec.id
    if (this.#queued.get(id) !== queued) return
    this.#queued.delete(id)
    queued.failed(reason)
    // A locked job (a node took it) cannot be removed, and a gone Redis answers nothing: its take is refused either way.
    void queued.job?.then((job) => job.remove()).catch(() => {})
  }

  /**
   * A node asks for a child it took from the queue. It is given the child (the create goes over its
   * link) when the child still waits and the node holds the job: the token it tells is the job's
   * lock in Redis, and the job names it as its processor. First match wins; anything else is
   * refused, so a client that read the job but did not take it gets nothing and decides nothing.
   */
  async #take({ child: id, token }: TakeMessage, link: NodeLink): Promise<void> {
    const queued = this.#queued.get(id)
    if (!queued) return link.refuse(id)
    const holds = await this.#holds(queued, token, link.node)
    if (holds instanceof Error) this.#giveUp(queued, holds)
    if (holds !== true || this.#queued.get(id) !== queued || link.ended) return link.refuse(id)
    this.#queued.delete(id)
    queued.claimed(link.channel)
  }

  /**
   * Whether `node` holds the queued child's job: BullMQ set the job's lock to the token of the
   * worker it gave the job to, and its processedBy to that worker's name (the node's id), in one
   * script. An Error when Redis cannot say: the start cannot go on without knowing.
   */
  async #holds(queued: Queued, token: string, node: string): Promise<boolean | Error> {
    try {
      const job = await this.#redis(queued.job!, 'add the child to the queue')
      const key = `${job.queueQualifiedName}:${job.id}`
      const replies = await this.#redis(this.#publisher.multi().get(`${key}:lock`).hget(key, 'pb').exec(), `check node ${node}'s claim on the child's job`)
      const [lock, processor] = (replies ?? []).map(([, value]) => value)
      return lock === token && processor === node
    } catch (error) {
      return error instanceof Error ? error : new Error(String(error))
    }
  }

  #receive(bytes: Buffer): void {
    if (this.#closing) return
    const envelope = decode(bytes)
    if (envelope instanceof Error) return // no sender to blame: a node whose frames are lost falls silent, and the heartbeat ends it
    const { from, frame } = envelope
    let link = this.#links.get(from)
    if (!link) {
      // A link opens with the node's hello; anything else is from a link already ended.
      const hello = Array.isArray(frame) ? (frame[0] as { type?: unknown; v?: unknown } | undefined) : undefined
      if (hello?.type !== 'hello') return
      if (hello.v !== PROTOCOL_VERSION) return this.#refuse(from, frame, hello.v)
      link = this.#open(from)
    }
    link.receive(frame)
  }

  /** A node of another protocol version: the starts whose job it proves it holds fail with the reason, and it is told bye. */
  #refuse(node: string, frame: unknown, version: unknown): void {
    const error = subagentError('ERR_SUBAGENT_VERSION', versionMismatchText(`node ${node}`, version, 'this host', PROTOCOL_VERSION))
    for (const { child, token } of takesOf(frame).takes) {
      const queued = this.#queued.get(child)
      if (queued) void this.#holds(queued, token, node).then((holds) => holds === true && this.#giveUp(queued, error))
    }
    void this.#publisher.publish(nodeChannel(this.#settings.queue, node), encode(this.#id, [{ type: 'bye' }])).catch(() => {})
  }

  #open(node: string): NodeLink {
    const target = nodeChannel(this.#settings.queue, node)
    const link = new NodeLink({
      node,
      config: this.#context.config,
      send: (frame: HostMessage[]) => void this.#publisher.publish(target, encode(this.#id, frame)).catch(() => {}),
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
    const suspects = this.#judge.check(this.#links.values(), (link) => (link.ended ? undefined : link.channel.pinged), (link, ms) => link.silent(ms, this.#silenceCause(), this.#otherNode(link)))
    const at = this.#judge.mark()
    for (const link of this.#links.values()) if (!suspects.has(link)) link.channel.ping(at)
  }

  /**
   * Fails the starts whose job is gone from Redis unclaimed: its node died holding it (BullMQ
   * failed it as stalled, never to run it again). Two sweeps in a row, since a node's last word
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
      const job = await queued.job?.catch(() => undefined)
      if (!job || this.#queued.get(queued.spec.id) !== queued) continue
      const lost = await within(this.#jobLost(job), this.#settings.redisTimeoutMs, () => 'no answer').catch(() => undefined)
      if (lost === undefined) continue // Redis is not answering: the start's own waits say so
      queued.missing = lost ? queued.missing + 1 : 0
      if (queued.missing >= 2) {
        this.#giveUp(queued, subagentError('ERR_SUBAGENT_NODE_LOST', 'the node that took this child from the queue stopped before building it (its job was failed or its lock expired; a child never runs twice): start it again'))
      }
    }
  }

  /** Gone or failed; or active with its lock expired: the node holding it is dead, even if no live node's stall check has run. */
  async #jobLost(job: Job): Promise<boolean> {
    const state = await job.getState()
    if (state === 'unknown' || state === 'failed') return true
    if (state !== 'active') return false
    return (await this.#publisher.exists(`${job.queueQualifiedName}:${job.id}:lock`)) === 0
  }

  /** Whether another node is linked to this host: somewhere a dead node's children can go (with none, they would wait for a node that may never come). */
  #otherNode(gone: NodeLink): boolean {
    for (const link of this.#links.values()) if (link !== gone && !link.ended) return true
    return false
  }

  #silenceCause(): string {
    const down = [this.#publisher, this.#subscriber].some((client) => client.status !== 'ready')
    return down ? `this host cannot reach Redis at ${this.#where()}: ${this.#lastRedisError?.message ?? 'disconnected'}` : 'it was killed or cut off from Redis'
  }

  /** Frames may have been lost while a connection was down: every link over it is over. */
  #connectionLost(): void {
    if (this.#closing) return
    const diagnostic = `this host lost its connection to Redis at ${this.#where()} (${this.#lastRedisError?.message ?? 'closed'}); frames to and from the node may have been lost, so the child was given up`
    for (const link of [...this.#links.values()]) link.stop({ stopReason: 'error', diagnostic })
  }

  #client(): Redis {
    const client = redisClient(this.#settings.connection)
    client.on('error', (error: Error) => void (this.#lastRedisError = error))
    client.on('close', () => this.#connectionLost())
    return client
  }

  #queue(depth: number): Queue {
    const name = queueName(this.#settings.queue, depth)
    let queue = this.#queues.get(name)
    if (!queue) {
      queue = new Queue(name, { connection: this.#publisher })
      queue.on('error', (error: Error) => void (this.#lastRedisError = error))
      this.#queues.set(name, queue)
    }
    return queue
  }

  /** Waits on Redis at most redisTimeoutMs; a failure or a timeout names what could not be done, where, and why. */
  async #redis<T>(promise: Promise<T>, what: string): Promise<T> {
    const ms = this.#settings.redisTimeoutMs
    const failed = `the host could not ${what} on Redis at ${this.#where()}`
    try {
      return await within(promise, ms, () => `${failed} within ${ms} ms (redisTimeoutMs): ${this.#lastRedisError?.message ?? 'no answer'}. Is Redis running and reachable?`)
    } catch (error) {
      if (error instanceof Error && error.message.startsWith(failed)) throw error
      throw subagentError('ERR_SUBAGENT_UNREACHABLE', `${failed}: ${messageOf(error)}`, { cause: error })
    }
  }

  #where(): string {
    return describeRedis(this.#settings.connection)
  }
}
