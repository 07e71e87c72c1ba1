/**
 * One piscina pool and its admission: at most `maxThreads × childrenPerWorker` children at once,
 * so piscina never queues a task it cannot start, and an abort while waiting for a slot simply
 * leaves the queue.
 */
import { availableParallelism } from 'node:os'
import type { MessagePort, Worker } from 'node:worker_threads'
import { Piscina } from 'piscina'
import type { PoolOptions } from './types.js'

const ENTRY = new URL('../worker/entry.js', import.meta.url)

interface Waiter {
  wake(): void
  fail(error: Error): void
}

export class WorkerPool {
  readonly #pool: Piscina
  readonly #capacity: number
  readonly #waiting: Waiter[] = []
  #admitted = 0
  #closed: Error | undefined

  /** `warm`: start `minThreads` (default half the cores) now; otherwise threads start on demand. */
  constructor(options: PoolOptions, warm: boolean) {
    const cores = availableParallelism()
    const maxThreads = options.maxThreads ?? Math.max(1, Math.round(cores * 1.5))
    const minThreads = warm ? Math.min(maxThreads, options.minThreads ?? Math.max(1, Math.floor(cores / 2))) : 0
    const childrenPerWorker = options.childrenPerWorker ?? 1
    this.#capacity = maxThreads * childrenPerWorker
    this.#pool = new Piscina({
      filename: ENTRY.href,
      minThreads,
      maxThreads,
      concurrentTasksPerWorker: childrenPerWorker,
      idleTimeout: options.idleTimeoutMs ?? 10_000,
      // A worker blocked in Atomics.wait could not hear the messages of a child it still holds.
      atomics: 'disabled',
      ...(options.resourceLimits ? { resourceLimits: options.resourceLimits } : {}),
    })
    // A worker that dies with no task in flight is reported here; without a listener it would crash the host.
    this.#pool.on('error', (error: Error) => {
      process.emitWarning(`a subagent worker thread failed outside any run: ${error.message}`, { code: 'SUBAGENT_WORKER_ERROR' })
    })
  }

  /**
   * Starts a task once a slot is free; the slot is held until the task settles, or until
   * `forfeit()` gives it up for a task stuck on a thread that cannot be found to stop.
   */
  async run(task: object, transferList: MessagePort[], signal: AbortSignal): Promise<{ running: Promise<unknown>; forfeit(): void }> {
    await this.#admit(signal)
    const running = this.#pool.run(task, { transferList })
    let held = true
    const leave = () => {
      if (!held) return
      held = false
      this.#admitted--
      this.#waiting.shift()?.wake()
    }
    running.then(leave, leave)
    return { running, forfeit: leave }
  }

  thread(threadId: number): Worker | undefined {
    return this.#pool.threads.find((thread) => thread.threadId === threadId)
  }

  async close(): Promise<void> {
    this.#closed = new Error('the host was closed while the child waited for a worker')
    for (const waiter of this.#waiting.splice(0)) waiter.fail(this.#closed)
    await this.#pool.destroy()
  }

  #admit(signal: AbortSignal): Promise<void> {
    if (this.#closed) return Promise.reject(this.#closed)
    if (this.#admitted < this.#capacity) {
      this.#admitted++
      return Promise.resolve()
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        wake: () => {
          signal.removeEventListener('abort', onAbort)
          this.#admitted++
          resolve()
        },
        fail: (error) => {
          signal.removeEventListener('abort', onAbort)
          reject(error)
        },
      }
      const onAbort = () => {
        const index = this.#waiting.indexOf(waiter)
        if (index >= 0) this.#waiting.splice(index, 1)
        reject(signal.reason)
      }
      signal.addEventListener('abort', onAbort, { once: true })
      this.#waiting.push(waiter)
    })
  }
}
