/**
 * The remote column: the BullMQ transport, its children on two worker node processes
 * (`subagent-worker node`, as a deployment starts them) on this machine, hosts and nodes meeting
 * on one Redis over loopback. Everything it needs is optional: the bullmq and ioredis packages
 * (optional peers, loaded here on demand) and a Redis that answers PING within a second. Without
 * them the column is skipped with one line on stderr and the bench runs as before.
 *
 * Every run has a queue of its own (`bench-<pid>-<random>`), so it never sees another run's jobs
 * (nor a test's), and its queues are obliterated when it ends. The nodes are started for each
 * scenario with the worker column's pool of that scenario spread over them (its threads halved,
 * its slots shared out), and kept for the next scenario only if it asks for the same: a node
 * fills a thread up to --children-per-worker before it starts the next, so one set sized for the
 * largest batch would run a small one on a single thread per node.
 */
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import type { Transport } from '../../index.js'
import { BENCH_MODULE } from './module-url.js'
import { PROC_AVAILABLE } from './measure/proc.js'
import { onInterrupt, startProcess, type Spawned } from './spawned.js'
import type { RemoteInfo } from './types.js'

/** How many worker node processes the remote column runs on. */
export const NODES = 2

/** The bench's own CLI: the nodes are `subagent-worker node` processes. */
const CLI = fileURLToPath(new URL('../main.js', import.meta.url))

/**
 * How long Redis has to answer PING before the remote column is skipped. A server that is not
 * there refuses at once; a loaded machine can take over a second to schedule the answer.
 */
const PING_TIMEOUT_MS = 5000

/** The worker column's idle timeout: a node's threads outlive a scenario's rounds. */
const NODE_IDLE_TIMEOUT_MS = 600_000

/** On SIGTERM a node lets running children finish this long (there are none unless the bench failed). */
const NODE_SHUTDOWN_MS = 2000

/** What the remote column loads on demand: the optional peers and the library's transport on them. */
export interface RemoteLibrary {
  bullmq: typeof import('bullmq')
  Redis: typeof import('ioredis').Redis
  bullmqTransport: typeof import('../../bullmq/index.js').bullmqTransport
  /** The names of a queue's per-depth BullMQ queues, for the clean-up. */
  queueNames(queue: string): string[]
}

/** Each node's threads (--max-threads) and children per thread (--children-per-worker). */
export interface NodePool {
  maxThreads: number
  childrenPerWorker: number
}

export interface RemoteRig {
  /** Grows as nodes are started: every node process of the run is listed. */
  readonly info: Extract<RemoteInfo, { measured: true }>
  /** The Redis URL as given (credentials included), for the clients. */
  readonly url: string
  readonly library: RemoteLibrary
  /**
   * Makes sure NODES nodes serve the queue with the worker column's `pool` spread over them
   * (nodePool): the running ones if they already do, else fresh ones. Call it before a
   * scenario's remote host is made.
   */
  nodes(pool: { maxThreads: number; childrenPerWorker?: number }): Promise<void>
  /** The running nodes' pids: their CPU is counted with the host's, as the process transport's runners are. */
  readonly nodePids: readonly number[]
  /** The running nodes' pool (nodes() must have been called). */
  readonly pool: NodePool
  /** A transport for one host (a bullmqTransport serves one host). */
  transport(): Transport
  /** What a row's setup records of the remote column: the running nodes. */
  setup(): Record<string, unknown>
  /** Stops the running nodes (SIGTERM, then SIGKILL), if any: between scenarios that do not use them. */
  release(): Promise<void>
  /** Stops the nodes and removes this run's queues from Redis. */
  stop(): Promise<void>
}

/** Where a Redis URL points, for messages: never its password. */
export function describeUrl(url: string): string {
  try {
    const parsed = new URL(url)
    return `${parsed.protocol}//${parsed.hostname}:${parsed.port || 6379}`
  } catch {
    return 'the given Redis URL'
  }
}

async function load(): Promise<RemoteLibrary | string> {
  try {
    const [bullmq, ioredis, transport, wire] = await Promise.all([import('bullmq'), import('ioredis'), import('../../bullmq/index.js'), import('../../bullmq/names.js')])
    const queueNames = (queue: string) => Array.from({ length: wire.QUEUE_DEPTHS }, (_, i) => wire.queueName(queue, i + 1))
    return { bullmq, Redis: ioredis.Redis, bullmqTransport: transport.bullmqTransport, queueNames }
  } catch (error) {
    const { code, message } = error as { code?: string; message?: string }
    if (code === 'ERR_MODULE_NOT_FOUND' && /bullmq|ioredis/.test(message ?? '')) return 'the bullmq and ioredis packages are not installed (npm install bullmq ioredis)'
    throw error
  }
}

/** PINGs Redis (PING_TIMEOUT_MS at most) and learns its pid; a string says why it cannot be used. */
async function probe(library: RemoteLibrary, url: string): Promise<{ pid: number | null } | string> {
  const where = describeUrl(url)
  let client: InstanceType<RemoteLibrary['Redis']>
  try {
    client = new library.Redis(url, { lazyConnect: true, connectTimeout: PING_TIMEOUT_MS, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null })
  } catch (error) {
    return `no Redis at ${where} (${(error as Error).message})`
  }
  // The socket's own error (ECONNREFUSED, ENOTFOUND) says more than the rejection ('Connection is closed.').
  let cause: Error | undefined
  client.on('error', (error: Error) => void (cause ??= error))
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer to PING within ${PING_TIMEOUT_MS} ms`)), PING_TIMEOUT_MS)))
  try {
    const answer = await Promise.race([client.connect().then(() => client.ping()), late])
    if (answer !== 'PONG') return `no Redis at ${where} (PING answered ${JSON.stringify(answer)})`
    const info = await Promise.race([client.info('server'), late]).catch(() => '')
    return { pid: readablePid(url, info) }
  } catch (error) {
    return `no Redis at ${where} (${(cause ?? (error as Error)).message})`
  } finally {
    clearTimeout(timer)
    client.disconnect()
  }
}

/** The Redis server's pid when its CPU can be read here: on this machine (loopback), in this pid namespace, with /proc. */
function readablePid(url: string, info: string): number | null {
  const pid = Number(/^process_id:(\d+)\s*$/m.exec(info)?.[1])
  if (!PROC_AVAILABLE || !Number.isInteger(pid) || pid <= 0) return null
  let host = ''
  try {
    host = new URL(url).hostname
  } catch {
    return null
  }
  if (!['127.0.0.1', 'localhost', '[::1]', '::1'].includes(host)) return null
  try {
    // A Redis in a container reports its own namespace's pid: whatever has that pid here is not it.
    return /redis|valkey|keydb/i.test(readFileSync(`/proc/${pid}/comm`, 'utf8')) ? pid : null
  } catch {
    return null
  }
}

/**
 * The worker column's pool spread over the nodes: its threads halved (rounded up) on each node,
 * its slots (threads × children per thread) shared out among all the nodes' threads.
 */
export function nodePool(pool: { maxThreads: number; childrenPerWorker?: number }): NodePool {
  const maxThreads = Math.max(1, Math.ceil(pool.maxThreads / NODES))
  const slots = pool.maxThreads * (pool.childrenPerWorker ?? 1)
  return { maxThreads, childrenPerWorker: Math.max(1, Math.ceil(slots / (NODES * maxThreads))) }
}

/**
 * The remote column's rig, or why there is none: the packages loaded and Redis pinged. Its nodes
 * are started by each scenario (nodes()); one that fails to start fails the run.
 */
export async function startRemote(url: string): Promise<RemoteRig | string> {
  const library = await load()
  if (typeof library === 'string') return library
  const redis = await probe(library, url)
  if (typeof redis === 'string') return redis
  return rig(library, url, `bench-${process.pid}-${randomBytes(3).toString('hex')}`, redis.pid)
}

/** Starts NODES nodes serving `queue` with `pool`; resolves once each printed its ready line. */
async function startNodes(url: string, queue: string, pool: NodePool): Promise<Spawned[]> {
  const argv = [
    CLI,
    'node',
    '--redis',
    url,
    '--queue',
    queue,
    '--max-threads',
    String(pool.maxThreads),
    // Warm and kept, as the worker column's pool is: no thread starts or retires mid-scenario.
    '--min-threads',
    String(pool.maxThreads),
    '--idle-timeout-ms',
    String(NODE_IDLE_TIMEOUT_MS),
    '--children-per-worker',
    String(pool.childrenPerWorker),
    '--agent-module',
    fileURLToPath(BENCH_MODULE),
    '--shutdown-ms',
    String(NODE_SHUTDOWN_MS),
  ]
  const started = await Promise.allSettled(Array.from({ length: NODES }, () => startProcess('a worker node', argv, /^node (\S+) serving queue /m)))
  const nodes = started.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []))
  const failed = started.find((result): result is PromiseRejectedResult => result.status === 'rejected')
  if (failed) {
    await Promise.all(nodes.map((node) => node.stop()))
    throw failed.reason
  }
  return nodes
}

function rig(library: RemoteLibrary, url: string, queue: string, redisPid: number | null): RemoteRig {
  const info: RemoteRig['info'] = { measured: true, redis: describeUrl(url), queue, redisPid, nodes: [] }
  let running: { pool: NodePool; nodes: Spawned[] } | undefined
  const release = async () => {
    const was = running
    running = undefined
    await Promise.all((was?.nodes ?? []).map((node) => node.stop()))
  }
  let stopped: Promise<void> | undefined
  const stop = () =>
    (stopped ??= (async () => {
      await release()
      await obliterate(library, url, [...library.queueNames(queue), floorQueue(queue)])
    })())
  // A SIGINT skips the run's `finally`: the queues are removed all the same.
  const forget = onInterrupt(stop)
  const current = () => {
    if (!running) throw new Error('the remote column has no nodes running: call nodes() first')
    return running
  }
  return {
    info,
    url,
    library,
    async nodes(workerPool) {
      const pool = nodePool(workerPool)
      if (running && running.pool.maxThreads === pool.maxThreads && running.pool.childrenPerWorker === pool.childrenPerWorker) return
      await release()
      const nodes = await startNodes(url, queue, pool)
      running = { pool, nodes }
      info.nodes.push(...nodes.map((node) => ({ id: node.ready[1]!, pid: node.pid, ...pool })))
    },
    get nodePids() {
      return current().nodes.map((node) => node.pid)
    },
    get pool() {
      return current().pool
    },
    // The bench measures, it does not judge: on a loaded machine a starved node is slow, not dead.
    transport: () => library.bullmqTransport({ connection: url, queue, nodeSilenceMs: 30_000 }),
    setup: () => {
      const { pool, nodes } = current()
      return { nodes: nodes.map((node) => ({ id: node.ready[1]!, pid: node.pid })), perNode: pool, queue, redis: info.redis }
    },
    release,
    stop: () => {
      forget()
      return stop()
    },
  }
}

/** The BullMQ floor's queue: beside the run's own, cleaned up with it. */
export function floorQueue(queue: string): string {
  return `${queue}-floor`
}

/** Removes this run's queues from Redis (their keys, the event streams); a failure is said, not fatal. */
async function obliterate(library: RemoteLibrary, url: string, names: string[]): Promise<void> {
  const connection = new library.Redis(url, { maxRetriesPerRequest: 1, connectTimeout: PING_TIMEOUT_MS })
  connection.on('error', () => {})
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('no answer within 5 s')), 5000)))
  try {
    await Promise.race([
      Promise.all(
        names.map(async (name) => {
          const queue = new library.bullmq.Queue(name, { connection })
          try {
            await queue.obliterate({ force: true })
          } finally {
            await queue.close()
          }
        }),
      ),
      late,
    ])
  } catch (error) {
    process.stderr.write(`bench: this run's queues could not be removed from Redis at ${describeUrl(url)}: ${(error as Error).message}\n`)
  } finally {
    clearTimeout(timer)
    connection.disconnect()
  }
}
