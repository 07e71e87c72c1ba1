/**
 * The worker threads of one delegation depth, and who runs where. The pool starts threads (up to
 * `maxThreads`, keeping `minThreads` warm), places each child on the least loaded thread that has
 * room (`childrenPerWorker`), queues starts beyond that, retires threads idle for
 * `idleTimeoutMs`, replaces a dead thread, and stops a thread that stopped answering while none
 * of its children was running. All thread bookkeeping lives here.
 */
import type { ResourceLimits } from 'node:worker_threads'
import type { RunnerConfig } from '../protocol/messages.js'
import type { RunnerChannel } from './channel.js'
import { WorkerThread } from './worker-thread.js'

export interface ThreadPoolSettings {
  minThreads: number
  maxThreads: number
  childrenPerWorker: number
  idleTimeoutMs: number
  resourceLimits: ResourceLimits | undefined
  graceMs: number
  config: RunnerConfig
}

interface Waiter {
  place(channel: RunnerChannel): void
  fail(error: Error): void
}

/** How long a thread may leave a heartbeat unanswered, beyond the grace, before it is judged stuck. */
const LIVENESS_MARGIN_MS = 1000

export class ThreadPool {
  readonly #settings: ThreadPoolSettings
  readonly #threads = new Set<WorkerThread>()
  readonly #waiting: Waiter[] = []
  readonly #silenceLimitMs: number
  #tick: NodeJS.Timeout | undefined
  #closed: Error | undefined

  constructor(settings: ThreadPoolSettings) {
    this.#settings = settings
    this.#silenceLimitMs = settings.graceMs + LIVENESS_MARGIN_MS
    this.#keepWarm()
  }

  /**
   * Places a child: `build` runs synchronously with the chosen channel (the child adopts its slot
   * there). Waits for a slot when every thread is full; an abort while waiting leaves the queue.
   */
  place<T>(signal: AbortSignal, build: (channel: RunnerChannel) => T): Promise<T> {
    if (this.#closed) return Promise.reject(this.#closed)
    if (signal.aborted) return Promise.reject(signal.reason)
    const channel = this.#room()
    if (channel) return Promise.resolve(build(channel))
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        const index = this.#waiting.indexOf(waiter)
        if (index >= 0) this.#waiting.splice(index, 1)
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
      this.#waiting.push(waiter)
    })
  }

  /** Stops every thread (their children end `aborted`) and refuses every waiting start. */
  async close(): Promise<void> {
    this.#closed ??= new Error('the host was closed while the child waited for a worker')
    for (const waiter of this.#waiting.splice(0)) waiter.fail(this.#closed)
    clearInterval(this.#tick)
    this.#tick = undefined
    const threads = [...this.#threads]
    for (const thread of threads) thread.stop({ stopReason: 'aborted', diagnostic: 'the host was closed before the child finished' })
    await Promise.all(threads.map((thread) => thread.exit))
  }

  /** The least loaded thread with room, starting a new one when all are full and the pool may grow. */
  #room(): RunnerChannel | undefined {
    let best: WorkerThread | undefined
    for (const thread of this.#threads) {
      if (thread.stopping || thread.channel.load >= this.#settings.childrenPerWorker) continue
      if (!best || thread.channel.load < best.channel.load) best = thread
    }
    if (best) return best.channel
    if (this.#threads.size < this.#settings.maxThreads) return this.#start().channel
    return undefined
  }

  #start(): WorkerThread {
    const { config, resourceLimits } = this.#settings
    const thread = new WorkerThread({
      config,
      resourceLimits,
      changed: () => this.#wake(),
      exited: (gone) => {
        this.#threads.delete(gone)
        if (this.#closed) return
        // A thread that never answered would not start again either (a broken install): no restart loop.
        if (gone.channel.greeted) this.#keepWarm()
        this.#wake()
      },
    })
    this.#threads.add(thread)
    this.#tick ??= setInterval(() => this.#check(), tickInterval(this.#silenceLimitMs, this.#settings.idleTimeoutMs)).unref()
    return thread
  }

  #keepWarm(): void {
    while (!this.#closed && this.#threads.size < this.#settings.minThreads) this.#start()
  }

  /** Gives freed room to the starts waiting for it, first come first served. */
  #wake(): void {
    while (this.#waiting.length > 0 && !this.#closed) {
      const channel = this.#room()
      if (!channel) return
      this.#waiting.shift()!.place(channel)
    }
  }

  /** Heartbeats and idle retirement, on one timer for the whole pool. */
  #check(): void {
    const now = performance.now()
    for (const thread of [...this.#threads]) {
      if (thread.stopping) continue
      const { channel } = thread
      const silent = channel.silentFor(now)
      if (silent > this.#silenceLimitMs && channel.judgeable) {
        thread.stop({
          stopReason: 'error',
          diagnostic: `the ${channel.label} stopped answering for ${Math.round(silent)} ms while none of its children was running (something on it never yields), so it was terminated and replaced`,
        })
        continue
      }
      channel.ping(now)
      const idleSince = channel.idleSince
      if (idleSince !== undefined && now - idleSince >= this.#settings.idleTimeoutMs && this.#threads.size > this.#settings.minThreads) {
        thread.stop({ stopReason: 'aborted', diagnostic: 'the thread was idle' })
      }
    }
    if (this.#threads.size === 0) {
      clearInterval(this.#tick)
      this.#tick = undefined
    }
  }
}

/** Often enough to find a stuck thread soon after its limit, and to honour a short idle timeout. */
function tickInterval(silenceLimitMs: number, idleTimeoutMs: number): number {
  return Math.max(50, Math.min(1000, silenceLimitMs / 4, idleTimeoutMs))
}
