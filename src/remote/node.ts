/**
 * A worker node (`subagent-worker node`), whatever the broker: takes child jobs from its queues
 * and runs the children on its own worker threads, the same host-light runners a host uses,
 * relaying each child's frames to the host that queued it. The broker (see broker.ts; BullMQ on
 * Redis in src/bullmq) gives it the jobs and carries the bytes.
 *
 *   capacity   maxThreads × childrenPerWorker per delegation depth level: a job stays held until its
 *              child left, and a child placed directly counts until it left, so it bounds live
 *              children, not starts. It is the broker's concurrency too; a job that comes while
 *              children placed directly fill the node goes back to the queue (hasRoom).
 *   a job      read and checked; the host's link opened (hello → welcome, once per host); the
 *              child asked for (take, with the job's lock token: the host gives it only to the
 *              node holding the job, and the job itself says nothing of what the child is); the
 *              child placed on a thread; the job ends when the child leaves the node.
 *   room       a host whose module this node serves is told its room at each level, and again
 *              whenever it changes (one word a level per frame, riding with the children's), and
 *              may then place children here directly, with no job: a create no take asked for.
 *              One that finds no room (other hosts, or jobs, took it first; the node is shutting
 *              down; or its host was never told of the room) is refused with
 *              ERR_SUBAGENT_NODE_FULL before anything of it ran, and its host queues it.
 *   faults     a thread that dies, or is terminated after the grace, ends its children and the
 *              host hears how (`ended`); a host that falls silent has its children let go; a
 *              stalled job (this node was killed) is failed by the broker, never run again.
 *   shutdown   close(): no new jobs, running children may finish until the deadline, then end
 *              `aborted`.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import { setMaxListeners } from 'node:events'
import { hostname } from 'node:os'
import type { RunnerConfig } from '../protocol/messages.js'
import { InvalidOptionError, integerOption, MAX_TIMER_MS } from '../parent/options.js'
import { settingsOf } from '../parent/host/settings.js'
import type { PoolOptions } from '../parent/types.js'
import type { Fault, RunnerChannel } from '../parent/runners/channel.js'
import { SilenceJudge } from '../parent/runners/liveness.js'
import { RunnerPool, type PoolSettings } from '../parent/runners/runner-pool.js'
import { DEFAULT_ABORT_GRACE_MS } from '../parent/runners/grace.js'
import { openWorkerThread } from '../parent/runners/endpoints/worker-thread.js'
import { HostLink, type Taken } from './host-link.js'
import { RelayedChild, type PlaceAgain } from './relayed-child.js'
import { decode, encode, readJob } from './envelope.js'
import { levelOf, type NodeBroker, type OpenNodeBroker } from './broker.js'
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
  /** The links whose host was told this node's room: their module is served here. */
  readonly #offered = new Set<HostLink>()
  /** By depth level (from 1): children held here, by a job or placed directly. */
  readonly #live: number[]
  /** The children placed directly, until each left: a shutdown waits for them as the broker does for its jobs. */
  readonly #placedHere = new Set<Promise<void>>()
  /** Aborted when close() begins: children are taken and placed here until then, and a take waiting for its link's welcome stops waiting. */
  readonly #shut = new AbortController()
  /** Aborted when the shutdown's deadline passes: a child still waiting for a slot is not placed. */
  readonly #deadline = new AbortController()
  /** By depth and runner config: children of one host config share threads. */
  readonly #pools = new Map<string, RunnerPool>()
  /**
   * Every child built here, by id, with the host that gave it. Ids are one host's to give, so a
   * second host naming one already here (a copy of another host's create, read off Redis) is
   * refused: built beside it, on its thread, the two would be one child to that thread.
   */
  readonly #ids = new Map<string, { host: string; builds: number }>()
  #check: NodeJS.Timeout | undefined
  readonly #judge: SilenceJudge
  #closing: Promise<void> | undefined

  constructor(settings: RemoteNodeSettings, open: OpenNodeBroker) {
    this.#settings = settings
    // Every placement in flight follows the deadline (placeUntil): many at once is no leak.
    setMaxListeners(0, this.#deadline.signal)
    setMaxListeners(0, this.#shut.signal)
    this.#judge = new SilenceJudge({ limitMs: settings.hostSilenceMs, intervalMs: HOST_CHECK_MS })
    this.id = settings.id
    this.#label = `node ${settings.id}`
    this.capacity = settings.pool.maxThreads * settings.pool.childrenPerWorker
    this.#broker = open({ receive: (bytes) => this.#receive(bytes), lost: (why) => this.#connectionLost(why) })
    this.#live = new Array<number>(this.#broker.levels + 1).fill(0)
  }

  /** Resolves once the node listens and takes jobs; rejects if the broker cannot be reached in time. */
  async start(): Promise<void> {
    // Hosts answer on this node's channel: it is listened to before any job can make a host aware of us.
    await this.#broker.listening()
    await this.#broker.take(this.capacity, (data, level, token) => this.#run(data, level, token), (level) => this.#free(level) > 0)
    this.#judge.resume()
    this.#check = setInterval(() => {
      this.#judge.check(this.#links.values(), (link) => link.heard, (link, ms) => link.close(`the host was silent for ${Math.round(ms)} ms`))
    }, HOST_CHECK_MS)
  }

  get #open(): boolean {
    return !this.#shut.signal.aborted
  }

  close(deadlineMs = 10_000): Promise<void> {
    return (this.#closing ??= this.#close(deadlineMs))
  }

  async #close(deadlineMs: number): Promise<void> {
    this.#shut.abort()
    // Its hosts place nothing more here: they queue instead.
    for (let level = 1; level <= this.#broker.levels; level++) this.#roomChanged(level)
    for (const link of this.#offered) link.sayRoomNow()
    const shutDown: Fault = { stopReason: 'aborted', diagnostic: `${this.#label} shut down before the child finished` }
    // Running children may finish until the deadline; then they end, and their jobs with them.
    const deadline = setTimeout(() => {
      this.#deadline.abort(this.#noRoom())
      for (const link of this.#links.values()) link.endAll(shutDown)
    }, deadlineMs)
    await Promise.all([this.#broker.stop(deadlineMs), ...this.#placedHere])
    clearTimeout(deadline)
    clearInterval(this.#check)
    await Promise.all([...this.#pools.values()].map((pool) => pool.close(shutDown)))
    for (const link of [...this.#links.values()]) link.close('the node shut down')
    // The last frames are sent at the end of this turn; the broker closes after them.
    await new Promise((resolve) => setImmediate(resolve))
    await this.#broker.close()
  }

  /** One job: one child, from asking its host for it to its leaving the node. */
  async #run(data: unknown, level: number, token: string): Promise<'done' | 'unasked' | 'unanswered'> {
    const read = readJob(data)
    if (read instanceof Error) throw read // the job fails, visibly in the broker; no host can be told
    this.#occupy(level, 1)
    try {
      // The host answers on this node's channel: after a dropped connection, not before it is listened to again.
      await this.#broker.listening()
      // Shut down meanwhile: nothing was asked for, and its pools may be closed.
      if (!this.#open) return 'unasked'
      const link = await this.#linkForTake(read.host)
      // Shut down while it waited for the link's welcome: nothing was asked for.
      if (!link) return 'unasked'
      // The job only names the child: what it is, the host says, and only to the node holding the job.
      const answer = await link.take(read.child, token)
      // The link ended first: the host may never have heard the take (pub/sub drops what is published while its channel reconnects).
      if (answer === 'unanswered') return this.#open ? 'unanswered' : 'unasked'
      // Refused: nothing ran, nor will.
      if (answer !== 'refused') await this.#build(link, answer, level, false)
      return 'done'
    } finally {
      this.#occupy(level, -1)
    }
  }

  /**
   * A child its host placed here directly: built if this node told that host of its room and has
   * room at its level, else refused before anything of it ran (the host queues it). The word that
   * it has none rides the refusal, so its host hears at once when it has room again.
   */
  #placed(taken: Taken, level: number, link: HostLink): void {
    const offered = this.#offered.has(link)
    if (!offered || this.#free(level) === 0) {
      if (offered) link.room(level, 0)
      return link.createFailed(taken.create.child, this.#noRoom())
    }
    this.#occupy(level, 1)
    const done = this.#build(link, taken, level, true)
      .catch(() => {}) // the link ended before its welcome: nothing was built, and nobody is left to tell
      .finally(() => {
        this.#placedHere.delete(done)
        this.#occupy(level, -1)
      })
    this.#placedHere.add(done)
  }

  /** Why a child placed here was not built (none of it ran: its host queues it). */
  #noRoom(): Error {
    return subagentError('ERR_SUBAGENT_NODE_FULL', `${this.#label} has no room for the child (${this.#open ? 'it runs as many as it may' : 'it is shutting down'}); it is queued for any node`)
  }

  /** A child its host gave this node (`direct`: placed, not taken): on a thread of the host's module, until it leaves. */
  async #build(link: HostLink, { create, signal }: Taken, level: number, direct: boolean): Promise<void> {
    const config = await link.welcome // always before the host's answer: the welcome opens its side of the link
    const agentModule = this.#moduleFor(config.agentModule)
    if (agentModule instanceof Error) return link.createFailed(create.child, agentModule)
    const id = this.#ids.get(create.child) ?? { host: link.host, builds: 0 }
    if (id.host !== link.host) return link.createFailed(create.child, subagentError('ERR_SUBAGENT_DUPLICATE', `${this.#label} already runs a child ${create.child} of another host, so it builds no second one of that id`))
    this.#ids.set(create.child, id)
    id.builds++
    try {
      await this.#onThread(link, { create, signal }, level, direct, config)
    } finally {
      if (--id.builds === 0) this.#ids.delete(create.child)
    }
  }

  /** The child on a thread of its host's pool at `level`, until it leaves (or, refused, not at all). */
  async #onThread(link: HostLink, { create, signal }: Taken, level: number, direct: boolean, config: RunnerConfig): Promise<void> {
    this.#offer(link)
    const pool = this.#poolFor(level, config)
    const graceMs = config.abortGraceMs ?? DEFAULT_ABORT_GRACE_MS
    // A child whose thread went is rebuilt on another thread of this pool, ahead of new starts (CONTRACT.md §8).
    const placeAgain: PlaceAgain = async (moving, build) => void (await placeUntil(pool, moving, link.signal, build, true))
    let child: RelayedChild
    try {
      // One placed directly and still waiting at the shutdown's deadline is refused (its host queues it); a taken one waits for the pool's close.
      const build = (thread: RunnerChannel) => {
        const relayed = new RelayedChild(create, link, thread, graceMs, placeAgain)
        link.adopt(relayed)
        return relayed
      }
      child = await (direct ? placeUntil(pool, signal, this.#deadline.signal, build) : pool.place(signal, build))
    } catch (error) {
      // Let go by its host (or the link ended): nothing to say. Past the shutdown's deadline: not built, and said so.
      if (!signal.aborted) link.createFailed(create.child, direct && this.#deadline.signal.aborted ? this.#deadline.signal.reason : error)
      return
    }
    await child.done
  }

  /** A child came (1) or left (-1) at `level`: the hosts hear the room, and a broker level resting for want of room may take jobs again. */
  #occupy(level: number, by: 1 | -1): void {
    this.#live[level]! += by
    if (by < 0 && this.#open) this.#broker.roomFreed(level)
    this.#roomChanged(level)
  }

  #roomChanged(level: number): void {
    for (const link of this.#offered) link.room(level, this.#free(level))
  }

  /** How many more children of `level` this node would take now. */
  #free(level: number): number {
    return this.#open ? Math.max(0, this.capacity - this.#live[level]!) : 0
  }

  /** A host whose module this node serves hears its room at every level, once; then each change. */
  #offer(link: HostLink): void {
    if (this.#offered.has(link) || link.ended) return
    this.#offered.add(link)
    for (let level = 1; level <= this.#broker.levels; level++) link.room(level, this.#free(level))
  }

  /** The module a host's children load here: the one it names, if this node serves it (the node runs no code it was not given). */
  #moduleFor(named: string | undefined): string | undefined | Error {
    const { modules } = this.#settings
    if (named === undefined || modules.includes(named)) return named
    return subagentError('ERR_SUBAGENT_MODULE_NOT_SERVED', `${this.#label} does not serve the agent module ${named}: start it with --agent-module ${named}`)
  }

  #poolFor(level: number, config: RunnerConfig): RunnerPool {
    const key = `${level} ${JSON.stringify(config)}`
    let pool = this.#pools.get(key)
    if (!pool) {
      const { pool: settings } = this.#settings
      const { env, resourceLimits, niceIncrement } = settings
      // Only the first pool of the first level is kept warm; deeper pools, and those of other host
      // configs, start their runners on demand and let them go when idle. Hosts choose their
      // configs, so warm threads kept for each would be as many as anyone writing to Redis likes.
      const warm = level === 1 && ![...this.#pools.keys()].some((other) => other.startsWith('1 '))
      pool = new RunnerPool({
        ...settings,
        minThreads: warm ? settings.minThreads : 0,
        maxQueue: Infinity,
        open: (events) => openWorkerThread({ env, resourceLimits, niceIncrement }, events),
        graceMs: config.abortGraceMs ?? DEFAULT_ABORT_GRACE_MS,
        config,
      })
      this.#pools.set(key, pool)
    }
    return pool
  }

  /**
   * The link a take goes over: one its host welcomed, or a new one (the take rides its hello).
   * One not welcomed yet may be one whose hello the host never heard (pub/sub drops what is
   * published while nobody listens: the host's channel was reconnecting), and the host reads
   * nothing else on a link it never opened: a take sent there would go unanswered, and its job
   * end unrun once the link is let go for silence. So the take waits for the welcome; if the link
   * ends first, the first to wake opens the next (its take rides the hello), and the rest wait
   * for that one's welcome. Undefined once the node shuts down: the take was not sent.
   */
  async #linkForTake(host: string): Promise<HostLink | undefined> {
    for (;;) {
      if (!this.#open) return undefined
      const link = this.#links.get(host)
      if (!link || link.ended) return this.#linkTo(host)
      if (link.welcomed) return link
      await settledOrAborted(link.welcome, this.#shut.signal)
    }
  }

  #linkTo(host: string): HostLink {
    let link = this.#links.get(host)
    if (!link || link.ended) {
      const id = randomUUID()
      link = new HostLink({
        id,
        host,
        label: this.#label,
        send: (frame) => this.#broker.send(host, encode(this.id, id, frame)),
        judge: this.#judge,
        levelOf: (depth) => levelOf(depth, this.#broker.levels),
        placed: (taken, level, from) => this.#placed(taken, level, from),
        ended: (ended) => {
          this.#offered.delete(ended)
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
    const link = this.#links.get(envelope.from)
    // Sent to a link that ended: not this one's to read. A host of an older version names no link: its welcome is refused for its version.
    if (link && (envelope.link === link.id || envelope.link === '')) link.receive(envelope.frame)
  }

  /** Frames may have been lost while the connection was down: every host link over it is over. */
  #connectionLost(why: string): void {
    if (this.#closing) return
    for (const link of [...this.#links.values()]) link.close(why)
  }
}

/**
 * `pool.place`, given up when either signal aborts (with its reason, the first one's if both
 * have). Not `AbortSignal.any`: the second signal is the link's or the node's, which live as long
 * as they do, and on Node 20 each `any` of one leaves an entry in it that is never freed (a
 * node's heap grew about 150 bytes a child); on later versions those entries are weak references
 * every collection walks. The listeners here go when the placement settles.
 */
function placeUntil<T>(pool: RunnerPool, first: AbortSignal, second: AbortSignal, build: (thread: RunnerChannel) => T, moved = false): Promise<T> {
  const either = new AbortController()
  const onFirst = () => either.abort(first.reason)
  const onSecond = () => either.abort(second.reason)
  if (first.aborted) onFirst()
  else if (second.aborted) onSecond()
  else {
    first.addEventListener('abort', onFirst, { once: true })
    second.addEventListener('abort', onSecond, { once: true })
  }
  return pool.place(either.signal, build, moved).finally(() => {
    first.removeEventListener('abort', onFirst)
    second.removeEventListener('abort', onSecond)
  })
}

/** Resolves once `promise` settles or `signal` aborts, whichever is first; the listener goes with it (the signal is the node's). */
function settledOrAborted(promise: Promise<unknown>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve()
  return new Promise((resolve) => {
    const done = () => {
      signal.removeEventListener('abort', done)
      resolve()
    }
    signal.addEventListener('abort', done, { once: true })
    promise.then(done, done)
  })
}
