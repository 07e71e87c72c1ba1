/**
 * A worker node on BullMQ (`subagent-worker node`): `startNode()` and its options, and the
 * node's broker over BullMQ and Redis: a Worker per depth queue, ioredis pub/sub. What a node
 * does with the jobs it is given is src/remote/node.ts.
 *
 *   jobs       a BullMQ Worker per depth queue, with concurrency `maxThreads × childrenPerWorker`,
 *              named with the node's id (BullMQ records it on each job it hands out: the host
 *              checks a take against it); `maxStalledCount: 0`, so a stalled job (this node was
 *              killed) is failed, never run again.
 *   Redis      reaching it at start is bounded by `redisTimeoutMs`; a dropped frame connection
 *              ends every host link; errors outside any child are logged once each.
 */
import { randomBytes } from 'node:crypto'
import { hostname } from 'node:os'
import { Worker, type Job } from 'bullmq'
import type { Redis } from 'ioredis'
import { InvalidOptionError, integerOption, MAX_TIMER_MS } from '../parent/options.js'
import { settingsOf } from '../parent/host/settings.js'
import type { PoolOptions } from '../parent/types.js'
import type { BrokerEvents, NodeBroker, RunJob } from '../remote/broker.js'
import { HOST_CHECK_MS, RemoteNode, type RemoteNodeSettings, type WorkerNode } from '../remote/node.js'
import { describeRedis, quit, redisClient, within, type RedisConnection } from './redis.js'
import { DEFAULT_QUEUE, hostChannel, nodeChannel, QUEUE_DEPTHS, queueName, validQueueName } from './names.js'
import { subagentError } from '../protocol/errors.js'

export interface NodeOptions {
  /** Where Redis is: a `redis://` or `rediss://` URL, or ioredis options (credentials and TLS pass through). */
  connection: RedisConnection
  /** The queue to serve; default 'subagent-worker'. A node takes jobs from this queue only. */
  queue?: string
  /**
   * The agent modules this node's children may load: a host names its own (createHost's
   * agentModule), and the node runs only those it was given. A host that names none gets none.
   */
  agentModules?: Array<string | URL>
  /** The node's threads, as a host's `pool` option (maxQueue aside). */
  pool?: Omit<PoolOptions, 'maxQueue'>
  /** How long a host may be silent before its children are let go; default 5000. */
  hostSilenceMs?: number
  /** How long reaching Redis at start may take; default 5000. */
  redisTimeoutMs?: number
  /** Names the node in diagnostics; default `<hostname>-<pid>-<random>`. */
  name?: string
  /** Where the node reports what goes wrong outside any child (Redis errors); default stderr. */
  log?: (line: string) => void
}

const NODE_KEYS = new Set(['connection', 'queue', 'agentModules', 'pool', 'hostSilenceMs', 'redisTimeoutMs', 'name', 'log'])

/** Starts a node; resolves once it listens on Redis and takes jobs, rejects if Redis cannot be reached in time. */
export async function startNode(options: NodeOptions): Promise<WorkerNode> {
  const settings = nodeSettings(options)
  const node = new RemoteNode(settings, (events) => new BullmqNodeBroker(settings, events))
  try {
    await node.start()
  } catch (error) {
    await node.close(0)
    throw error
  }
  return node
}

interface NodeSettings extends RemoteNodeSettings {
  connection: RedisConnection
  queue: string
  redisTimeoutMs: number
}

function nodeSettings(options: NodeOptions): NodeSettings {
  if (typeof options !== 'object' || options === null) throw new InvalidOptionError('startNode options', options, 'an object with a connection')
  for (const key of Object.keys(options)) {
    if (!NODE_KEYS.has(key)) throw new InvalidOptionError(key, (options as unknown as Record<string, unknown>)[key], `a known node option (${[...NODE_KEYS].join(', ')})`)
  }
  const { connection, queue = DEFAULT_QUEUE, agentModules = [], name } = options
  if (typeof connection !== 'string' && (typeof connection !== 'object' || connection === null)) {
    throw new InvalidOptionError('connection', connection, 'a redis:// or rediss:// URL, or ioredis options ({ host, port, password, tls })')
  }
  if (!validQueueName(queue)) throw new InvalidOptionError('queue', queue, 'a queue name of 1 to 100 letters, digits, dots, dashes or underscores')
  if (!Array.isArray(agentModules)) throw new InvalidOptionError('agentModules', agentModules, 'a list of module URLs or absolute paths')
  if (name !== undefined && (typeof name !== 'string' || name === '')) throw new InvalidOptionError('name', name, 'a non-empty string')
  // The host's own checks, so a node's pool and modules are refused with the same words.
  const modules = agentModules.map((module) => settingsOf({ agentModule: module }).agentModule!.href)
  const { pool } = settingsOf({ pool: options.pool ?? {} })
  return {
    connection,
    queue,
    modules,
    pool,
    hostSilenceMs: integerOption('hostSilenceMs', options.hostSilenceMs, HOST_CHECK_MS, MAX_TIMER_MS) ?? 5000,
    redisTimeoutMs: integerOption('redisTimeoutMs', options.redisTimeoutMs, 1, MAX_TIMER_MS) ?? 5000,
    id: name ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`,
    log: options.log ?? ((line) => void process.stderr.write(`${line}\n`)),
  }
}

class BullmqNodeBroker implements NodeBroker {
  readonly #settings: NodeSettings
  readonly #label: string
  readonly #publisher: Redis
  readonly #subscriber: Redis
  /** BullMQ's workers share this one (it duplicates it for their blocking reads). */
  readonly #jobs: Redis
  readonly #workers: Worker[] = []
  #lastError: Error | undefined
  #lastReported: string | undefined

  constructor(settings: NodeSettings, events: BrokerEvents) {
    this.#settings = settings
    this.#label = `node ${settings.id}`
    this.#publisher = this.#client(events)
    this.#subscriber = this.#client(events)
    this.#jobs = this.#client(events, { maxRetriesPerRequest: null })
    this.#subscriber.on('messageBuffer', (_channel: Buffer, bytes: Buffer) => events.receive(bytes))
  }

  async listen(): Promise<void> {
    const { queue, redisTimeoutMs, id } = this.#settings
    await within(this.#subscriber.subscribe(nodeChannel(queue, id)), redisTimeoutMs, () => this.#unreachable()).catch((error: Error) => {
      throw error.message.startsWith(this.#label) ? error : subagentError('ERR_SUBAGENT_UNREACHABLE', this.#unreachable(error), { cause: error })
    })
  }

  async take(concurrency: number, run: RunJob): Promise<void> {
    const { queue, redisTimeoutMs, id } = this.#settings
    for (let depth = 1; depth <= QUEUE_DEPTHS; depth++) {
      const worker = new Worker(queueName(queue, depth), (job: Job, token?: string) => this.#process(run, job, depth, token), {
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

  async #process(run: RunJob, job: Job, depth: number, token: string | undefined): Promise<void> {
    if (token === undefined) throw subagentError('ERR_SUBAGENT_REMOTE_SHAPE', 'BullMQ gave the job without a lock token: this node cannot prove it holds it')
    return run(job.data, depth, token)
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
