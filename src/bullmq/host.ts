/**
 * The host's side of the BullMQ transport: `bullmqTransport()` and its options, and the host's
 * broker over BullMQ and Redis (a Queue per depth, ioredis pub/sub). What the host does with
 * the queue and the links is src/remote/host-transport.ts.
 *
 *   a job      added to the queue of its depth, `{ v, host, child }` and nothing else, under a random
 *              id (BullMQ's counted ids start again when Redis loses its data).
 *   a take     proven by the job's lock: BullMQ set it to the token of the worker it gave the job
 *              to, and the job's processedBy to that worker's name (the node's id), in one script.
 *   a lost job gone, failed, or active with its lock expired.
 *   batching   the adds of one turn go as one `addBulk`, the claim checks of one turn's takes as one
 *              MULTI (TurnBatch): the same commands, fewer round trips.
 *   served     BullMQ's workers of the depth's queue (CLIENT LIST: each node's Worker names its
 *              connection after the node): a live node is connected, busy or not. A Redis without
 *              CLIENT LIST (GCP) counts as served, so a start there waits instead of failing.
 *   timeouts   every wait on Redis is bounded by `redisTimeoutMs` (BullMQ and ioredis would retry
 *              forever); a dropped connection is reported, since pub/sub may have lost frames.
 */
import { randomUUID } from 'node:crypto'
import { Queue, type Job } from 'bullmq'
import type { Redis } from 'ioredis'
import type { ChildJob } from '../protocol/shapes/job.js'
import { integerOption, MAX_TIMER_MS } from '../parent/options.js'
import type { Transport } from '../parent/transport.js'
import type { BrokerEvents, HostBroker, QueuedJob } from '../remote/broker.js'
import { HEARTBEAT_MS, remoteTransport } from '../remote/host-transport.js'
import { describeRedis, quit, redisClient, Subscription, SUBSCRIBER, within, type RedisConnection } from './redis.js'
import { hostChannel, nodeChannel, QUEUE_DEPTHS, queueName } from './names.js'
import { checkedPlace } from './options.js'
import { TurnBatch } from './turn-batch.js'
import { messageOf, subagentError } from '../protocol/errors.js'

export interface BullmqTransportOptions {
  /** Where Redis is: a `redis://` or `rediss://` URL, or ioredis options (credentials and TLS pass through). */
  connection: RedisConnection
  /** The queue the nodes serve (`subagent-worker node --queue`); default 'subagent-worker'. */
  queue?: string
  /** How long a Redis command may take before whatever waits on it fails; default 5000. */
  redisTimeoutMs?: number
  /** How long a node may leave the heartbeat unanswered before its children end `error`; default 3000. */
  nodeSilenceMs?: number
  /** How long a start may wait on a queue no live node serves before it fails; default 30000. One behind busy nodes waits on. */
  placementTimeoutMs?: number
}

interface Settings {
  connection: RedisConnection
  queue: string
  redisTimeoutMs: number
  nodeSilenceMs: number
  placementTimeoutMs: number
}

/** A finished job leaves nothing behind in Redis; it is never retried (a child runs at most once). */
const JOB_OPTIONS = { removeOnComplete: true, removeOnFail: true, attempts: 1 } as const

/**
 * Each job's options, with an id of its own: BullMQ's own ids count from the queue's id key, which
 * starts again at 1 when Redis loses its data, so a job queued before the loss would share its id
 * (and the host's checks of its state and lock) with another added after. A child moved off a dead
 * node is queued again while its first job may still be there, so the id is not the child's either.
 */
const jobOptions = () => ({ ...JOB_OPTIONS, jobId: randomUUID() })

/** Every option, checked against BullmqTransportOptions by the compiler: one added there must be named here. */
const TRANSPORT_KEYS = new Set(Object.keys({ connection: 0, queue: 0, redisTimeoutMs: 0, nodeSilenceMs: 0, placementTimeoutMs: 0 } satisfies Record<keyof BullmqTransportOptions, 0>))

/**
 * A turn's jobs in one `addBulk`; a lone one by `add`, which measured 10-35 % faster per
 * one-at-a-time delegation than an `addBulk` of one (bench/remote-commands.mjs --in-flight 1).
 */
async function addJobs(queue: Queue, jobs: ChildJob[]): Promise<Job[]> {
  if (jobs.length === 1) return [await queue.add('child', jobs[0]!, jobOptions())]
  return queue.addBulk(jobs.map((data) => ({ name: 'child', data, opts: jobOptions() })))
}

/** A transport for `createHost({ transport })`: children run on BullMQ worker nodes. */
export function bullmqTransport(options: BullmqTransportOptions): Transport {
  const settings = settingsOf(options)
  return remoteTransport('bullmq', settings, (host, events) => new BullmqHostBroker(settings, host, events))
}

function settingsOf(options: BullmqTransportOptions): Settings {
  const { connection, queue } = checkedPlace(options, 'bullmqTransport options', TRANSPORT_KEYS, 'a known bullmqTransport option')
  return {
    connection,
    queue,
    redisTimeoutMs: integerOption('redisTimeoutMs', options.redisTimeoutMs, 1, MAX_TIMER_MS) ?? 5000,
    nodeSilenceMs: integerOption('nodeSilenceMs', options.nodeSilenceMs, HEARTBEAT_MS, MAX_TIMER_MS) ?? 3000,
    placementTimeoutMs: integerOption('placementTimeoutMs', options.placementTimeoutMs, 1, MAX_TIMER_MS) ?? 30_000,
  }
}

interface DepthQueue {
  queue: Queue
  adds: TurnBatch<ChildJob, Job>
  /** The queue's workers' connection names, while the broker is being asked; undefined entries when it cannot say. */
  workers: Promise<string[] | undefined> | undefined
}

class BullmqHostBroker implements HostBroker {
  readonly #settings: Settings
  readonly #events: BrokerEvents
  readonly #publisher: Redis
  readonly #subscriber: Redis
  readonly #subscription: Subscription
  readonly queue: string
  readonly levels = QUEUE_DEPTHS
  /** By queue name (depths past QUEUE_DEPTHS share one), with its adds of a turn batched. */
  readonly #queues = new Map<string, DepthQueue>()
  /** The claim checks of a turn's takes, one MULTI: each job's lock token and processedBy, by job key. */
  readonly #claims = new TurnBatch<string, unknown[]>((keys) => this.#readClaims(keys))
  #lastRedisError: Error | undefined

  constructor(settings: Settings, host: string, events: BrokerEvents) {
    this.#settings = settings
    this.queue = settings.queue
    this.#events = events
    this.#publisher = this.#client()
    this.#subscriber = this.#client(SUBSCRIBER)
    this.#subscriber.on('messageBuffer', (_channel: Buffer, bytes: Buffer) => events.receive(bytes))
    this.#subscription = new Subscription(this.#subscriber, hostChannel(settings.queue, host))
  }

  listening(): Promise<unknown> {
    // Listening already, as nearly always: no bounded wait (a timer) for every start.
    if (this.#subscription.listening) return this.#subscription.current
    return this.#redis(this.#subscription.current, 'subscribe to its Redis channel')
  }

  enqueue(depth: number, data: ChildJob): QueuedJob {
    const job = this.#queue(depth).adds.call(data)
    job.catch(() => {}) // surfaced by added()
    return {
      added: () => this.#redis(job, 'add the child to the queue'),
      heldBy: (node, token) => this.#heldBy(job, node, token),
      lost: () => this.#lost(job),
      remove: () => void job.then((added) => added.remove()).catch(() => {}),
    }
  }

  /** Whether a BullMQ worker (a node; not `beside`) is connected to the depth's queue: one CLIENT LIST answers every caller asking at once. */
  async served(depth: number, beside?: string): Promise<boolean | undefined> {
    const entry = this.#queue(depth)
    if (!entry.workers) {
      const asked = within(entry.queue.getWorkers(), this.#settings.redisTimeoutMs, () => 'no answer')
      // A node's Worker is named after it: its connection's name ends ':w:<node id>'. GCP's one placeholder entry has no rawname.
      entry.workers = asked.then((workers) => workers.map((worker) => String(worker['rawname'] ?? '')), () => undefined).finally(() => (entry.workers = undefined))
    }
    const names = await entry.workers
    return names?.some((name) => beside === undefined || !name.endsWith(`:w:${beside}`))
  }

  send(node: string, bytes: Buffer): void {
    void this.#publisher.publish(nodeChannel(this.#settings.queue, node), bytes).catch(() => {})
  }

  silenceCause(): string {
    const down = [this.#publisher, this.#subscriber].some((client) => client.status !== 'ready')
    return down ? `this host cannot reach Redis at ${this.#where()}: ${this.#lastRedisError?.message ?? 'disconnected'}` : 'it was killed or cut off from Redis'
  }

  async close(): Promise<void> {
    const bound = this.#settings.redisTimeoutMs
    await Promise.allSettled([...this.#queues.values()].map(({ queue }) => within(queue.close(), bound, () => 'queue close timed out')))
    // QUIT answers after every command sent before it: the last frames (bye) reach Redis first.
    await Promise.all([quit(this.#publisher, bound), quit(this.#subscriber, bound)])
  }

  /** BullMQ's lock and processedBy of the job, read in one MULTI with the other takes of this turn. */
  async #heldBy(adding: Promise<Job>, node: string, token: string): Promise<boolean> {
    const job = await this.#redis(adding, 'add the child to the queue')
    const [lock, processor] = await this.#redis(this.#claims.call(`${job.queueQualifiedName}:${job.id}`), `check node ${node}'s claim on the child's job`)
    return lock === token && processor === node
  }

  /** Each job's lock and processedBy, in one MULTI (BullMQ sets both in one script). */
  async #readClaims(keys: string[]): Promise<unknown[][]> {
    const transaction = this.#publisher.multi()
    for (const key of keys) transaction.get(`${key}:lock`).hget(key, 'pb')
    const values = ((await transaction.exec()) ?? []).map(([, value]) => value)
    return keys.map((_, i) => values.slice(2 * i, 2 * i + 2))
  }

  async #lost(adding: Promise<Job>): Promise<boolean | undefined> {
    const job = await adding.catch(() => undefined)
    if (!job) return undefined
    return within(this.#jobLost(job), this.#settings.redisTimeoutMs, () => 'no answer').catch(() => undefined)
  }

  /** Gone or failed; or active with its lock expired: the node holding it is dead, even if no live node's stall check has run. */
  async #jobLost(job: Job): Promise<boolean> {
    const state = await job.getState()
    if (state === 'unknown' || state === 'failed') return true
    if (state !== 'active') return false
    return (await this.#publisher.exists(`${job.queueQualifiedName}:${job.id}:lock`)) === 0
  }

  #client(overrides = {}): Redis {
    const client = redisClient(this.#settings.connection, overrides)
    client.on('error', (error: Error) => void (this.#lastRedisError = error))
    client.on('close', () => this.#events.lost(`this host lost its connection to Redis at ${this.#where()} (${this.#lastRedisError?.message ?? 'closed'})`))
    return client
  }

  #queue(depth: number): DepthQueue {
    const name = queueName(this.#settings.queue, depth)
    let entry = this.#queues.get(name)
    if (!entry) {
      const queue = new Queue(name, { connection: this.#publisher })
      queue.on('error', (error: Error) => void (this.#lastRedisError = error))
      entry = { queue, adds: new TurnBatch((jobs) => addJobs(queue, jobs)), workers: undefined }
      this.#queues.set(name, entry)
    }
    return entry
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
