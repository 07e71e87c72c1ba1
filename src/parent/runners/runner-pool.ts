/**
 * The runners of one delegation depth, and who runs where: a host's (threads, processes) and a
 * node's (its threads) alike.
 * The pool starts runners (up to `maxThreads`, keeping `minThreads` warm), places each child on
 * the least loaded runner that has room (`childrenPerWorker`), queues starts beyond that (at
 * most `maxQueue`), retires runners idle for `idleTimeoutMs`, replaces a dead one, and stops one
 * that stopped answering while none of its children was running module code. All runner bookkeeping lives
 * here; what a runner is, is the endpoint's business.
 */
import type { ResourceLimits } from 'node:worker_threads'
import type { RunnerConfig } from '../../protocol/messages.js'
import type { Fault, RunnerChannel } from './channel.js'
import { SilenceJudge } from './liveness.js'
import { RunnerSite, type OpenEndpoint } from './runner-site.js'
import { CLOSED_BEFORE_END, closedWhileWaiting, subagentError } from '../../protocol/errors.js'

/** The pool as the transports use it: every value filled in. */
export interface PoolSettings {
  minThreads: number
  maxThreads: number
  childrenPerWorker: number
  idleTimeoutMs: number
  /** How long a new runner may take to load the agent module (CONTRACT.md §8: never a hung promise). */
  loadTimeoutMs: number
  maxQueue: number
  resourceLimits: ResourceLimits | undefined
  /** Added to the host's nice value for each runner, 0 to 19. */
  niceIncrement: number
  /** Each runner's whole environment. */
  env: Record<string, string>
}

export interface RunnerPoolSettings {
  open: OpenEndpoint
  minThreads: number
  maxThreads: number
  childrenPerWorker: number
  idleTimeoutMs: number
  loadTimeoutMs: number
  /** Starts that may wait for a slot; one more is refused at once. */
  maxQueue: number
  graceMs: number
  config: RunnerConfig
}

interface Waiter {
  place(channel: RunnerChannel): void
  fail(error: Error): void
}

/** How long a new runner may take to load the agent module, unless `pool.loadTimeoutMs` says otherwise. */
export const DEFAULT_LOAD_TIMEOUT_MS = 30_000

/** How long a runner may leave a heartbeat unanswered, beyond the grace, before it is judged stuck. */
const LIVENESS_MARGIN_MS = 1000

export class RunnerPool {
  readonly #settings: RunnerPoolSettings
  readonly #runners = new Set<RunnerSite>()
  readonly #waiting: Waiter[] = []
  /** Moved children waiting for a slot: served before any start. */
  readonly #moving: Waiter[] = []
  readonly #judge: SilenceJudge
  #tick: NodeJS.Timeout | undefined
  #closed: Error | undefined

  constructor(settings: RunnerPoolSettings) {
    this.#settings = settings
    const limitMs = settings.graceMs + LIVENESS_MARGIN_MS
    this.#judge = new SilenceJudge({ limitMs, intervalMs: tickInterval(limitMs, settings.idleTimeoutMs, settings.loadTimeoutMs) })
    this.#keepWarm()
  }

  /**
   * Places a child: `build` runs synchronously with the chosen channel (the child adopts its slot
   * there). Waits for a slot when every runner is full; an abort while waiting leaves the queue.
   */
  /**
   * `moved`: a child moved off a runner that went (CONTRACT.md §8), already published and part-way
   * through its turn: it waits ahead of every start, and is never refused for a full queue.
   */
  place<T>(signal: AbortSignal, build: (channel: RunnerChannel) => T, moved = false): Promise<T> {
    if (this.#closed) return Promise.reject(this.#closed)
    if (signal.aborted) return Promise.reject(signal.reason)
    const channel = this.#room()
    if (channel) return Promise.resolve(build(channel))
    const { maxQueue, maxThreads, childrenPerWorker } = this.#settings
    if (!moved && this.#waiting.length >= maxQueue) {
      return Promise.reject(
        subagentError('ERR_SUBAGENT_POOL_FULL',
          `every slot is taken (${maxThreads} runners × ${childrenPerWorker} children) and pool.maxQueue (${maxQueue}) starts already wait for one: retry later, or raise pool.maxThreads, pool.childrenPerWorker or pool.maxQueue`,
        ),
      )
    }
    const queue = moved ? this.#moving : this.#waiting
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        const index = queue.indexOf(waiter)
        if (index >= 0) queue.splice(index, 1)
        reject(signal.reason)
      }
      const waiter: Waiter = {
        place: (channel) => {
          signal.removeEventListener('abort', onAbort)
          try {
            resolve(build(channel))
          } catch (error) {
            reject(error)
          }
        },
        fail: (error) => {
          signal.removeEventListener('abort', onAbort)
          reject(error)
        },
      }
      signal.addEventListener('abort', onAbort, { once: true })
      queue.push(waiter)
    })
  }

  /** Stops every runner (their children end with `fault`) and refuses every waiting start. */
  async close(fault: Fault = { stopReason: 'aborted', diagnostic: CLOSED_BEFORE_END }): Promise<void> {
    this.#closed ??= closedWhileWaiting('for a slot')
    for (const waiter of [...this.#moving.splice(0), ...this.#waiting.splice(0)]) waiter.fail(this.#closed)
    clearInterval(this.#tick)
    this.#tick = undefined
    const runners = [...this.#runners]
    for (const runner of runners) runner.stop(fault)
    await Promise.all(runners.map((runner) => runner.exit))
  }

  /** The least loaded runner with room, starting a new one when all are full and the pool may grow. */
  #room(): RunnerChannel | undefined {
    let best: RunnerSite | undefined
    for (const runner of this.#runners) {
      if (runner.stopping || runner.channel.load >= this.#settings.childrenPerWorker) continue
      if (!best || runner.channel.load < best.channel.load) best = runner
    }
    if (best) return best.channel
    if (this.#runners.size < this.#settings.maxThreads) return this.#start().channel
    return undefined
  }

  #start(): RunnerSite {
    const { config, open } = this.#settings
    const runner = new RunnerSite({
      config,
      open,
      changed: () => this.#wake(),
      exited: (gone) => {
        this.#runners.delete(gone)
        if (this.#closed) return
        // A runner that never loaded its module would not load it again either (a broken install, a
        // module whose top-level code never ends): no restart loop.
        if (gone.channel.reached === 'ready') this.#keepWarm()
        this.#wake()
      },
    })
    this.#runners.add(runner)
    if (!this.#tick) {
      this.#judge.resume()
      this.#tick = setInterval(() => this.#check(), this.#judge.intervalMs).unref()
    }
    return runner
  }

  #keepWarm(): void {
    while (!this.#closed && this.#runners.size < this.#settings.minThreads) this.#start()
  }

  /** Gives freed room to the moved children waiting for it, then to the starts, first come first served. */
  #wake(): void {
    while (this.#moving.length + this.#waiting.length > 0 && !this.#closed) {
      const channel = this.#room()
      if (!channel) return
      const next = this.#moving.shift() ?? this.#waiting.shift()!
      next.place(channel)
    }
  }

  /**
   * A runner still loading the agent module past the bound: its top-level code never ends (an
   * await that never settles answers pings, so silence would never judge it). The children placed
   * on it fail; none moves, as none would start anywhere else either.
   */
  #loadTimedOut(runner: RunnerSite): void {
    const { channel } = runner
    runner.stop({
      stopReason: 'error',
      diagnostic: `the ${channel.label} did not finish loading the agent module within ${this.#settings.loadTimeoutMs} ms (pool.loadTimeoutMs): its top-level code never completed (an await that never settles, or code that never yields), so it was ${channel.kind.ended}`,
    })
  }

  /** Heartbeats, module-load bounds and idle retirement, on one timer for the whole pool. */
  #check(): void {
    // Only a runner with no child running module code is judged: CPU work is what runners are for.
    const suspects = this.#judge.check(this.#runners, (runner) => (runner.stopping || !runner.channel.judgeable ? undefined : runner.channel.pinged), (runner, silent) => {
      const { channel } = runner
      runner.stop({
        stopReason: 'error',
        diagnostic: `the ${channel.label} stopped answering for ${Math.round(silent)} ms while none of its children was running module code (something on it never yields), so it was ${channel.kind.ended} and replaced`,
        // Its last frames may be unread: only the children a host call holds are sure to be where the host saw them.
      }, undefined, 'held')
    })
    const now = performance.now()
    const at = this.#judge.mark()
    for (const runner of [...this.#runners]) {
      if (runner.stopping || suspects.has(runner)) continue
      const { channel } = runner
      if (channel.loading && now - channel.openedAt >= this.#settings.loadTimeoutMs) {
        this.#loadTimedOut(runner)
        continue
      }
      channel.ping(at)
      const idleSince = channel.idleSince
      if (idleSince !== undefined && now - idleSince >= this.#settings.idleTimeoutMs && this.#runners.size > this.#settings.minThreads) {
        runner.stop({ stopReason: 'aborted', diagnostic: 'the runner was idle' })
      }
    }
    if (this.#runners.size === 0) {
      clearInterval(this.#tick)
      this.#tick = undefined
    }
  }
}

/** Often enough to find a stuck runner soon after its limit, and to honour a short idle or load timeout. */
function tickInterval(silenceLimitMs: number, idleTimeoutMs: number, loadTimeoutMs: number): number {
  return Math.max(50, Math.min(1000, silenceLimitMs / 4, idleTimeoutMs, loadTimeoutMs / 4))
}
