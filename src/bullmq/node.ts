/**
 * A worker node (`subagent-worker node`): takes child jobs from its BullMQ queues and runs the
 * children on its own worker threads, the same host-light runners a host uses, relaying each
 * child's frames to the host that queued it.
 *
 *   capacity   maxThreads × childrenPerWorker per delegation depth: the BullMQ concurrency, and a
 *              job stays active until its child left, so it bounds live children, not starts.
 *   a job      read and checked; the host's link opened (hello → welcome, once per host); the
 *              child asked for (take, with the job's lock token: the host gives it only to the
 *              node holding the job, and the job itself says nothing of what the child is); the
 *              child placed on a thread; the job ends when the child leaves the node.
 *   faults     a thread that dies, or is terminated after the grace, ends its children and the
 *              host hears how (`ended`); a host that falls silent has its children let go; a
 *              stalled job (this node was killed) is failed by BullMQ, never run again.
 *   shutdown   close(): no new jobs, running children may finish until the deadline, then end
 *              `aborted`.
 */
import { randomBytes } from 'node:crypto'
import { hostname } from 'node:os'
import { Worker, type Job } from 'bullmq'
import type { Redis } from 'ioredis'
import type { RunnerConfig } from '../protocol/messages.js'
import type { Fault } from '../parent/runners/channel.js'
import { SilenceJudge } from '../parent/runners/liveness.js'
import { InvalidOptionError, integerOption, MAX_TIMER_MS } from '../parent/options.js'
import { RunnerPool, type PoolSettings } from '../parent/runners/runner-pool.js'
import { settingsOf } from '../parent/host/settings.js'
import type { PoolOptions } from '../parent/types.js'
import { DEFAULT_ABORT_GRACE_MS } from '../parent/runners/grace.js'
import { openWorkerThread } from '../parent/runners/endpoints/worker-thread.js'
import { HostLink } from '../remote/host-link.js'
import { describeRedis, quit, redisClient, within, type RedisConnection } from './redis.js'
import { RelayedChild, type PlaceAgain } from '../remote/relayed-child.js'
import { decode, encode, readJob } from '../remote/envelope.js'
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

export interface WorkerNode {
  readonly id: string
  /** Live children per delegation depth: maxThreads × childrenPerWorker. */
  readonly capacity: number
  /** Takes no new job; running children may finish within `deadlineMs` (default 10000), then end `aborted`. */
  close(deadlineMs?: number): Promise<void>
}

/** How often hosts' silence is judged. */
const CHECK_MS = 500

const NODE_KEYS = new Set(['connection', 'queue', 'agentModules', 'pool', 'hostSilenceMs', 'redisTimeoutMs', 'name', 'log'])

/** Starts a node; resolves once it listens on Redis and takes jobs, rejects if Redis cannot be reached in time. */
export async function startNode(options: NodeOptions): Promise<WorkerNode> {
  const node = new Node(nodeSettings(options))
  try {
    await node.start()
  } catch (error) {
    await node.close(0)
    throw error
  }
  return node
}

interface NodeSettings {
  connection: RedisConnection
  queue: string
  modules: string[]
  pool: PoolSettings
  hostSilenceMs: number
  redisTimeoutMs: number
  id: string
  log: (line: string) => void
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
    hostSilenceMs: integerOption('hostSilenceMs', options.hostSilenceMs, CHECK_MS, MAX_TIMER_MS) ?? 5000,
    redisTimeoutMs: integerOption('redisTimeoutMs', options.redisTimeoutMs, 1, MAX_TIMER_MS) ?? 5000,
    id: name ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`,
    log: options.log ?? ((line) => void process.stderr.write(`${line}\n`)),
  }
}

class Node implements WorkerNode {
  readonly id: string
  readonly capacity: number
  readonly #settings: NodeSettings
  readonly #label: string
  readonly #publisher: Redis
  readonly #subscriber: Redis
  /** BullMQ's workers share this one (it duplicates it for their blocking reads). */
  readonly #jobs: Redis
  readonly #workers: Worker[] = []
  readonly #links = new Map<string, HostLink>()
  /** By depth and runner config: children of one host config share threads. */
  readonly #pools = new Map<string, RunnerPool>()
  #check: NodeJS.Timeout | undefined
  readonly #judge: SilenceJudge
  #closing: Promise<void> | undefined
  #lastError: Error | undefined
  #lastReported: string | undefined

  constructor(settings: NodeSettings) {
    this.#settings = settings
    this.#judge = new SilenceJudge({ limitMs: settings.hostSilenceMs, intervalMs: CHECK_MS })
    this.id = settings.id
    this.#label = `node ${settings.id}`
    this.capacity = settings.pool.maxThreads * settings.pool.childrenPerWorker
    this.#publisher = this.#client()
    this.#subscriber = this.#client()
    this.#jobs = this.#client({ maxRetriesPerRequest: null })
    this.#subscriber.on('messageBuffer', (_channel: Buffer, bytes: Buffer) => this.#receive(bytes))
  }

  async start(): Promise<void> {
    const { queue, redisTimeoutMs } = this.#settings
    // Hosts answer on this channel: it is listened to before any job can make a host aware of us.
    await within(this.#subscriber.subscribe(nodeChannel(queue, this.id)), redisTimeoutMs, () => this.#unreachable()).catch((error: Error) => {
      throw error.message.startsWith(this.#label) ? error : subagentError('ERR_SUBAGENT_UNREACHABLE', this.#unreachable(error), { cause: error })
    })
    for (let depth = 1; depth <= QUEUE_DEPTHS; depth++) {
      const worker = new Worker(queueName(queue, depth), (job: Job, token?: string) => this.#run(job, depth, token), {
        connection: this.#jobs,
        // BullMQ records it on each job it gives this node (processedBy): the host checks a take against it.
        name: this.id,
        concurrency: this.capacity,
        // A child runs at most once: a job whose node died is failed, not handed to another node.
        maxStalledCount: 0,
      })
      worker.on('error', (error: Error) => this.#report(error))
      this.#workers.push(worker)
    }
    await within(Promise.all(this.#workers.map((worker) => worker.waitUntilReady())), redisTimeoutMs, () => this.#unreachable())
    this.#judge.resume()
    this.#check = setInterval(() => {
      this.#judge.check(this.#links.values(), (link) => link.heard, (link, ms) => link.close(`the host was silent for ${Math.round(ms)} ms`))
    }, CHECK_MS)
  }

  close(deadlineMs = 10_000): Promise<void> {
    return (this.#closing ??= this.#close(deadlineMs))
  }

  async #close(deadlineMs: number): Promise<void> {
    const shutDown: Fault = { stopReason: 'aborted', diagnostic: `${this.#label} shut down before the child finished` }
    // Running children may finish until the deadline; then they end, and their jobs with them.
    const deadline = setTimeout(() => {
      for (const link of this.#links.values()) link.endAll(shutDown)
    }, deadlineMs)
    const bound = this.#settings.redisTimeoutMs
    // BullMQ's close waits on Redis: when it is gone, stop waiting once the children are over.
    await Promise.allSettled(this.#workers.map((worker) => within(worker.close(), deadlineMs + bound, () => 'worker close timed out').catch(() => void worker.close(true).catch(() => {}))))
    clearTimeout(deadline)
    clearInterval(this.#check)
    await Promise.all([...this.#pools.values()].map((pool) => pool.close(shutDown)))
    for (const link of [...this.#links.values()]) link.close('the node shut down')
    // The last frames are sent at the end of this turn; QUIT answers after them.
    await new Promise((resolve) => setImmediate(resolve))
    await Promise.all([quit(this.#publisher, bound), quit(this.#subscriber, bound), quit(this.#jobs, bound)])
  }

  /** One job: one child, from asking its host for it to its leaving the node. */
  async #run(job: Job, depth: number, token: string | undefined): Promise<void> {
    const read = readJob(job.data)
    if (read instanceof Error) throw read // the job fails, visibly in BullMQ; no host can be told
    if (token === undefined) throw subagentError('ERR_SUBAGENT_REMOTE_SHAPE', 'BullMQ gave the job without a lock token: this node cannot prove it holds it')
    const link = this.#linkTo(read.host)
    // The job only names the child: what it is, the host says, and only to the node holding the job.
    const taken = await link.take(read.child, token)
    if (!taken) return // refused (the host gave up on it, or never queued it) or the host is gone: nothing ran
    const { create, signal } = taken
    const config = await link.welcome // always before the host's answer: the welcome opens its side of the link
    const agentModule = this.#moduleFor(config.agentModule)
    if (agentModule instanceof Error) return link.createFailed(create.child, agentModule)
    const pool = this.#poolFor(depth, config)
    const graceMs = config.abortGraceMs ?? DEFAULT_ABORT_GRACE_MS
    // A child whose thread went is rebuilt on another thread of this pool, ahead of new starts (CONTRACT.md §8).
    const placeAgain: PlaceAgain = async (moving, build) => void (await pool.place(AbortSignal.any([moving, link.signal]), build, true))
    let child: RelayedChild
    try {
      child = await pool.place(signal, (thread) => {
        const relayed = new RelayedChild(create, link, thread, graceMs, placeAgain)
        link.adopt(relayed)
        return relayed
      })
    } catch (error) {
      if (!signal.aborted) link.createFailed(create.child, error)
      return
    }
    await child.done
  }

  /** The module a host's children load here: the one it names, if this node serves it (the node runs no code it was not given). */
  #moduleFor(named: string | undefined): string | undefined | Error {
    const { modules } = this.#settings
    if (named === undefined || modules.includes(named)) return named
    return subagentError('ERR_SUBAGENT_MODULE_NOT_SERVED', `${this.#label} does not serve the agent module ${named}: start it with --agent-module ${named}`)
  }

  #poolFor(depth: number, config: RunnerConfig): RunnerPool {
    const key = `${depth} ${JSON.stringify(config)}`
    let pool = this.#pools.get(key)
    if (!pool) {
      const { pool: settings } = this.#settings
      const { env, resourceLimits } = settings
      pool = new RunnerPool({
        ...settings,
        // Only the first level is kept warm; deeper pools start their runners on demand.
        minThreads: depth === 1 ? settings.minThreads : 0,
        maxQueue: Infinity,
        open: (events) => openWorkerThread({ env, resourceLimits }, events),
        graceMs: config.abortGraceMs ?? DEFAULT_ABORT_GRACE_MS,
        config,
      })
      this.#pools.set(key, pool)
    }
    return pool
  }

  #linkTo(host: string): HostLink {
    let link = this.#links.get(host)
    if (!link || link.ended) {
      const target = hostChannel(this.#settings.queue, host)
      link = new HostLink({
        host,
        label: this.#label,
        send: (frame) => void this.#publisher.publish(target, encode(this.id, frame)).catch(() => {}),
        judge: this.#judge,
        ended: (ended) => {
          if (this.#links.get(host) === ended) this.#links.delete(host)
        },
      })
      this.#links.set(host, link)
    }
    return link
  }

  #receive(bytes: Buffer): void {
    const envelope = decode(bytes)
    if (envelope instanceof Error) return this.#settings.log(`${this.#label}: a frame could not be read: ${envelope.message}`)
    this.#links.get(envelope.from)?.receive(envelope.frame)
  }

  #client(overrides = {}): Redis {
    const client = redisClient(this.#settings.connection, overrides)
    client.on('error', (error: Error) => void (this.#lastError = error))
    // Frames may have been lost while the connection was down: every host link over it is over.
    client.on('close', () => {
      if (client === this.#jobs || this.#closing) return
      for (const link of [...this.#links.values()]) link.close(`${this.#label} lost its connection to Redis`)
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
