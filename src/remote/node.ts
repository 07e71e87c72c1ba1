/**
 * A worker node (`subagent-worker node`), whatever the broker: takes child jobs from its queues
 * and runs the children on its own worker threads, the same host-light runners a host uses,
 * relaying each child's frames to the host that queued it. The broker (see broker.ts; BullMQ on
 * Redis in src/bullmq) gives it the jobs and carries the bytes.
 *
 *   capacity   maxThreads × childrenPerWorker per delegation depth: the broker's concurrency, and
 *              a job stays held until its child left, so it bounds live children, not starts.
 *   a job      read and checked; the host's link opened (hello → welcome, once per host); the
 *              child asked for (take, with the job's lock token: the host gives it only to the
 *              node holding the job, and the job itself says nothing of what the child is); the
 *              child placed on a thread; the job ends when the child leaves the node.
 *   faults     a thread that dies, or is terminated after the grace, ends its children and the
 *              host hears how (`ended`); a host that falls silent has its children let go; a
 *              stalled job (this node was killed) is failed by the broker, never run again.
 *   shutdown   close(): no new jobs, running children may finish until the deadline, then end
 *              `aborted`.
 */
import { randomBytes } from 'node:crypto'
import { hostname } from 'node:os'
import type { RunnerConfig } from '../protocol/messages.js'
import { InvalidOptionError, integerOption, MAX_TIMER_MS } from '../parent/options.js'
import { settingsOf } from '../parent/host/settings.js'
import type { PoolOptions } from '../parent/types.js'
import type { Fault } from '../parent/runners/channel.js'
import { SilenceJudge } from '../parent/runners/liveness.js'
import { RunnerPool, type PoolSettings } from '../parent/runners/runner-pool.js'
import { DEFAULT_ABORT_GRACE_MS } from '../parent/runners/grace.js'
import { openWorkerThread } from '../parent/runners/endpoints/worker-thread.js'
import { HostLink } from './host-link.js'
import { RelayedChild, type PlaceAgain } from './relayed-child.js'
import { decode, encode, readJob } from './envelope.js'
import type { NodeBroker, OpenNodeBroker } from './broker.js'
import { subagentError } from '../protocol/errors.js'

export interface WorkerNode {
  readonly id: string
  /** Live children per delegation depth: maxThreads × childrenPerWorker. */
  readonly capacity: number
  /** Takes no new job; running children may finish within `deadlineMs` (default 10000), then end `aborted`. */
  close(deadlineMs?: number): Promise<void>
}

/** The options every node has, whatever its broker; an adapter's options add where the broker is. */
export interface RemoteNodeOptions {
  /**
   * The agent modules this node's children may load: a host names its own (createHost's
   * agentModule), and the node runs only those it was given. A host that names none gets none.
   */
  agentModules?: Array<string | URL>
  /** The node's threads, as a host's `pool` option (maxQueue aside). */
  pool?: Omit<PoolOptions, 'maxQueue'>
  /** How long a host may be silent before its children are let go; default 5000. */
  hostSilenceMs?: number
  /** Names the node in diagnostics and its Redis connections (printable ASCII, no spaces); default `<hostname>-<pid>-<random>`. */
  name?: string
  /** Where the node reports what goes wrong outside any child (its broker's errors); default stderr. */
  log?: (line: string) => void
}

/** What a node is, whatever its broker. */
export interface RemoteNodeSettings {
  id: string
  /** The agent modules it serves, as URLs. */
  modules: string[]
  pool: PoolSettings
  hostSilenceMs: number
  log: (line: string) => void
}

const NODE_NAME = /^[!-~]{1,200}$/

/** How often hosts' silence is judged. */
const HOST_CHECK_MS = 500

/** Checks the options every node has; the adapter checks its own (the keys, where its broker is) first. */
export function remoteNodeSettings(options: RemoteNodeOptions): RemoteNodeSettings {
  const { agentModules = [], name } = options
  if (!Array.isArray(agentModules)) throw new InvalidOptionError('agentModules', agentModules, 'a list of module URLs or absolute paths')
  // It names the node's Redis connections too (CLIENT SETNAME takes no spaces), and hosts count a queue's nodes by them.
  if (name !== undefined && (typeof name !== 'string' || !NODE_NAME.test(name))) throw new InvalidOptionError('name', name, 'a name of 1 to 200 printable ASCII characters without spaces')
  // The host's own checks, so a node's pool and modules are refused with the same words.
  const modules = agentModules.map((module) => settingsOf({ agentModule: module }).agentModule!.href)
  const { pool } = settingsOf({ pool: options.pool ?? {} })
  return {
    modules,
    pool,
    hostSilenceMs: integerOption('hostSilenceMs', options.hostSilenceMs, HOST_CHECK_MS, MAX_TIMER_MS) ?? 5000,
    id: name ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`,
    log: options.log ?? ((line) => void process.stderr.write(`${line}\n`)),
  }
}

/** Starts a node over the broker `open` makes; resolves once it listens and takes jobs, rejects if the broker cannot be reached in time. */
export async function startRemoteNode(settings: RemoteNodeSettings, open: OpenNodeBroker): Promise<WorkerNode> {
  const node = new RemoteNode(settings, open)
  try {
    await node.start()
  } catch (error) {
    await node.close(0)
    throw error
  }
  return node
}

class RemoteNode implements WorkerNode {
  readonly id: string
  readonly capacity: number
  readonly #settings: RemoteNodeSettings
  readonly #label: string
  readonly #broker: NodeBroker
  readonly #links = new Map<string, HostLink>()
  /** By depth and runner config: children of one host config share threads. */
  readonly #pools = new Map<string, RunnerPool>()
  #check: NodeJS.Timeout | undefined
  readonly #judge: SilenceJudge
  #closing: Promise<void> | undefined

  constructor(settings: RemoteNodeSettings, open: OpenNodeBroker) {
    this.#settings = settings
    this.#judge = new SilenceJudge({ limitMs: settings.hostSilenceMs, intervalMs: HOST_CHECK_MS })
    this.id = settings.id
    this.#label = `node ${settings.id}`
    this.capacity = settings.pool.maxThreads * settings.pool.childrenPerWorker
    this.#broker = open({ receive: (bytes) => this.#receive(bytes), lost: (why) => this.#connectionLost(why) })
  }

  /** Resolves once the node listens and takes jobs; rejects if the broker cannot be reached in time. */
  async start(): Promise<void> {
    // Hosts answer on this node's channel: it is listened to before any job can make a host aware of us.
    await this.#broker.listen()
    await this.#broker.take(this.capacity, (data, depth, token) => this.#run(data, depth, token))
    this.#judge.resume()
    this.#check = setInterval(() => {
      this.#judge.check(this.#links.values(), (link) => link.heard, (link, ms) => link.close(`the host was silent for ${Math.round(ms)} ms`))
    }, HOST_CHECK_MS)
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
    await this.#broker.stop(deadlineMs)
    clearTimeout(deadline)
    clearInterval(this.#check)
    await Promise.all([...this.#pools.values()].map((pool) => pool.close(shutDown)))
    for (const link of [...this.#links.values()]) link.close('the node shut down')
    // The last frames are sent at the end of this turn; the broker closes after them.
    await new Promise((resolve) => setImmediate(resolve))
    await this.#broker.close()
  }

  /** One job: one child, from asking its host for it to its leaving the node. */
  async #run(data: unknown, depth: number, token: string): Promise<void> {
    const read = readJob(data)
    if (read instanceof Error) throw read // the job fails, visibly in the broker; no host can be told
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
      link = new HostLink({
        host,
        label: this.#label,
        send: (frame) => this.#broker.send(host, encode(this.id, frame)),
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

  /** Frames may have been lost while the connection was down: every host link over it is over. */
  #connectionLost(why: string): void {
    if (this.#closing) return
    for (const link of [...this.#links.values()]) link.close(why)
  }
}
