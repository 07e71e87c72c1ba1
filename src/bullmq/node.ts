/**
 * A worker node on BullMQ (`subagent-worker node`): `startNode()` and its options, and the
 * node's broker over BullMQ and Redis: a Worker per depth queue, ioredis pub/sub. What a node
 * does with the jobs it is given is src/remote/node.ts.
 *
 *   jobs       a BullMQ Worker per depth queue, with concurrency `maxThreads × childrenPerWorker`,
 *              named with the node's id (BullMQ records it on each job it hands out: the host
 *              checks a take against it); `maxStalledCount: 0`, so a stalled job (this node was
 *              killed) is failed, never run again.
 *   no room    a job that comes while children placed directly fill the node is moved back to
 *              wait (BullMQ's moveToWait, before anything of its child was asked for) for another
 *              node, and that level's Worker pauses until the node has room again. Its
 *              concurrency is never lowered instead: BullMQ would not fetch again when it is
 *              raised until a job it holds settles, and it refuses zero. A job the node took and
 *              shut down before asking its host for goes back to wait the same way.
 *   Redis      reaching it at start is bounded by `redisTimeoutMs`; a dropped frame connection
 *              ends every host link; errors outside any child are logged once each.
 */
import { WaitingError, Worker, type Job } from 'bullmq'
import type { Redis } from 'ioredis'
import { integerOption, MAX_TIMER_MS } from '../parent/options.js'
import type { BrokerEvents, NodeBroker, RunJob } from '../remote/broker.js'
import { remoteNodeSettings, startRemoteNode, type RemoteNodeOptions, type RemoteNodeSettings, type WorkerNode } from '../remote/node.js'
import { describeRedis, quit, redisClient, Subscription, SUBSCRIBER, within, type RedisConnection } from './redis.js'
import { hostChannel, nodeChannel, QUEUE_DEPTHS, queueName } from './names.js'
import { checkedPlace } from './options.js'
import { subagentError } from '../protocol/errors.js'

export interface NodeOptions extends RemoteNodeOptions {
  /** Where Redis is: a `redis://` or `rediss://` URL, or ioredis options (credentials and TLS pass through). */
  connection: RedisConnection
  /** The queue to serve; default 'subagent-worker'. A node takes jobs from this queue only. */
  queue?: string
  /** How long reaching Redis may take, at the start and when the node's channel is listened to again after a dropped connection; default 5000. */
  redisTimeoutMs?: number
}

/** The job's field that marks a take of it went unanswered once (see #firstUnanswered). */
const UNANSWERED = 'swUnanswered'

/** Every option, checked against NodeOptions by the compiler: one added there must be named here. */
const NODE_KEYS = new Set(Object.keys({ connection: 0, queue: 0, agentModules: 0, pool: 0, hostSilenceMs: 0, redisTimeoutMs: 0, name: 0, log: 0 } satisfies Record<keyof NodeOptions, 0>))

/** Starts a node; resolves once it listens on Redis and takes jobs, rejects if Redis cannot be reached in time. */
export async function startNode(options: NodeOptions): Promise<WorkerNode> {
  const settings = nodeSettings(options)
  return startRemoteNode(settings, (events) => new BullmqNodeBroker(settings, events))
}

interface NodeSettings extends RemoteNodeSettings {
  connection: RedisConnection
  queue: string
  redisTimeoutMs: number
}

function nodeSettings(options: NodeOptions): NodeSettings {
  const { connection, queue } = checkedPlace(options, 'startNode options', NODE_KEYS, 'a known node option')
  return {
    ...remoteNodeSettings(options),
    connection,
    queue,
    redisTimeoutMs: integerOption('redisTimeoutMs', options.redisTimeoutMs, 1, MAX_TIMER_MS) ?? 5000,
  }
}

class BullmqNodeBroker implements NodeBroker {
  readonly #settings: NodeSettings
  readonly #label: string
  readonly #publisher: Redis
  readonly #subscriber: Redis
  readonly #subscription: Subscription
  /** BullMQ's workers share this one (it duplicates it for their blocking reads). */
  readonly #jobs: Redis
  /** One a depth level, the first level's first. */
  readonly #workers: Worker[] = []
  readonly levels = QUEUE_DEPTHS
  #hasRoom: (level: number) => boolean = () => true
  /** Levels whose Worker is paused: a job came while the node had no room for it. */
  readonly #resting = new Set<number>()
  #lastError: Error | undefined
  #lastReported: string | undefined

  constructor(settings: NodeSettings, events: BrokerEvents) {
    this.#settings = settings
    this.#label = `node ${settings.id}`
    this.#publisher = this.#client(events)
    this.#subscriber = this.#client(events, SUBSCRIBER)
    this.#jobs = this.#client(events, { maxRetriesPerRequest: null })
    this.#subscriber.on('messageBuffer', (_channel: Buffer, bytes: Buffer) => events.receive(bytes))
    this.#subscription = new Subscription(this.#subscriber, nodeChannel(settings.queue, settings.id))
  }

  async listening(): Promise<void> {
    // Listening already, as nearly always: no bounded wait (a timer) for every job.
    if (this.#subscription.listening) return
    await within(this.#subscription.current, this.#settings.redisTimeoutMs, () => this.#unreachable()).catch((error: Error) => {
      throw error.message.startsWith(this.#label) ? error : subagentError('ERR_SUBAGENT_UNREACHABLE', this.#unreachable(error), { cause: error })
    })
  }

  async take(concurrency: number, run: RunJob, hasRoom: (level: number) => boolean): Promise<void> {
    const { queue, redisTimeoutMs, id } = this.#settings
    this.#hasRoom = hasRoom
    for (let level = 1; level <= QUEUE_DEPTHS; level++) {
      const worker = new Worker(queueName(queue, level), (job: Job, token?: string) => this.#process(run, job, level, token), {
        connection: this.#jobs,
        // BullMQ records it on each job it gives this node (processedBy): the host checks a take against it.
        name: id,
        concurrency,
        // A child runs at most once: a job whose node died is failed, not handed to another node.
        maxStalledCount: 0,
      })
      worker.on('error', (error: Error) => this.#report(error))
      this.#workers.push(worker)
    }
    await within(Promise.all(this.#workers.map((worker) => worker.waitUntilReady())), redisTimeoutMs, () => this.#unreachable())
  }

  roomFreed(level: number): void {
    if (!this.#resting.delete(level)) return
    void this.#workers[level - 1]?.resume()
  }

  send(host: string, bytes: Buffer): void {
    void this.#publisher.publish(hostChannel(this.#settings.queue, host), bytes).catch(() => {})
  }

  async stop(deadlineMs: number): Promise<void> {
    const bound = this.#settings.redisTimeoutMs
    // BullMQ's close waits on Redis: when it is gone, stop waiting once the children are over.
    await Promise.allSettled(this.#workers.map((worker) => within(worker.close(), deadlineMs + bound, () => 'worker close timed out').catch(() => void worker.close(true).catch(() => {}))))
  }

  async close(): Promise<void> {
    const bound = this.#settings.redisTimeoutMs
    await Promise.all([quit(this.#publisher, bound), quit(this.#subscriber, bound), quit(this.#jobs, bound)])
  }

  async #process(run: RunJob, job: Job, level: number, token: string | undefined): Promise<void> {
    if (token === undefined) throw subagentError('ERR_SUBAGENT_REMOTE_SHAPE', 'BullMQ gave the job without a lock token: this node cannot prove it holds it')
    if (!this.#hasRoom(level)) return this.#handBack(job, level, token)
    const ran = await run(job.data, level, token)
    if (ran === 'unasked' || (ran === 'unanswered' && (await this.#firstUnanswered(job)))) return this.#giveBack(job, token)
  }

  /**
   * Whether a take of this job goes unanswered for the first time: marked on the job, so it goes
   * back once. A node cannot tell a lost take from a dead host, whose jobs would otherwise go
   * round the nodes for good. (BullMQ's attemptsStarted would not do: it counts the jobs handed
   * back for want of room too.) The host never reads the mark; one a queue writer sets only ends
   * the job, which it could do anyway.
   */
  async #firstUnanswered(job: Job): Promise<boolean> {
    return (await this.#jobs.hsetnx(`${job.queueQualifiedName}:${job.id}`, UNANSWERED, '1')) === 1
  }

  /**
   * A job the node has no room for (children placed directly fill it): back to wait, unrun, for
   * another node; the level's Worker takes none until `roomFreed` (pausing it first, so it does
   * not take this one again).
   */
  async #handBack(job: Job, level: number, token: string): Promise<never> {
    this.#resting.add(level)
    void this.#workers[level - 1]!.pause(true).catch((error: Error) => this.#report(error))
    return this.#giveBack(job, token)
  }

  /** Back to wait, unrun: a job that completed would be removed, and its host would count its child lost. */
  async #giveBack(job: Job, token: string): Promise<never> {
    await job.moveToWait(token)
    throw new WaitingError()
  }

  #client(events: BrokerEvents, overrides = {}): Redis {
    const client = redisClient(this.#settings.connection, overrides)
    client.on('error', (error: Error) => void (this.#lastError = error))
    // Frames may have been lost while the connection was down: every host link over it is over.
    client.on('close', () => {
      if (client === this.#jobs) return
      events.lost(`${this.#label} lost its connection to Redis`)
    })
    return client
  }

  /** Errors outside any child (Redis going away): each said once, not once per reconnect attempt and worker. */
  #report(error: Error): void {
    const line = `${this.#label}: ${error.message}`
    if (line === this.#lastReported) return
    this.#lastReported = line
    this.#settings.log(line)
  }

  /** Why Redis could not be used at start: the command's own error, else the connection's last. */
  #unreachable(error?: Error): string {
    const why = error?.message ?? this.#lastError?.message ?? 'no answer'
    return `${this.#label} could not reach Redis at ${describeRedis(this.#settings.connection)} within ${this.#settings.redisTimeoutMs} ms: ${why}`
  }
}
