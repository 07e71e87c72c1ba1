/**
 * The channel floor: what the worker transport's design costs with no library at all. As many
 * plain worker threads as the pool has, started once, each on one persistent channel; the host
 * queues small messages and sends each thread at most one postMessage per event-loop turn
 * carrying all of them, and the thread echoes them back the same way. Measured lazily, once,
 * in the same run as S1-S3: one round trip at a time (S1, S2) and items echoed per second with
 * the scenario's in-flight count (S3).
 */
import { once } from 'node:events'
import { Worker } from 'node:worker_threads'
import { saturate } from '../harness.js'
import type { Plan } from '../plan.js'
import type { Progress } from '../report/progress.js'
import { figure } from '../measure/stats.js'
import type { Figure } from '../types.js'

const CHANNEL_WORKER = new URL('./channel-floor-worker.js', import.meta.url)

/**
 * Echoes a throughput round (and its warm-up) sends per delegation the scenario's round has: an
 * echo costs a small fraction of a delegation, and a round of the same count would last a few
 * milliseconds, mostly timer noise.
 */
const ECHOES_PER_DELEGATION = 10

interface Message {
  type: 'echo'
  id: number
}

export interface ChannelFloor {
  /** One message's round trip at a time, in ms. */
  latency(): Promise<Figure>
  /** Messages echoed per second with the plan's in-flight count spread over `threads`. */
  throughput(options: { threads: number }): Promise<Figure>
}

interface Channels {
  /** Resolves once the message is back from its thread. */
  echo(): Promise<void>
  close(): Promise<void>
}

async function openChannels(threads: number): Promise<Channels> {
  const workers = Array.from({ length: threads }, () => new Worker(CHANNEL_WORKER))
  const queues: Message[][] = workers.map(() => [])
  const pending = new Map<number, { resolve(): void; reject(error: unknown): void }>()
  let failure: unknown
  let scheduled = false
  let sent = 0
  const fail = (error: unknown) => {
    failure ??= error
    for (const waiter of pending.values()) waiter.reject(error)
    pending.clear()
  }
  // One postMessage per thread per turn, carrying everything queued for it since the last one.
  const flush = () => {
    scheduled = false
    workers.forEach((worker, i) => {
      const queue = queues[i]!
      if (queue.length === 0) return
      queues[i] = []
      worker.postMessage(queue)
    })
  }
  for (const worker of workers) {
    worker.on('message', (batch: Message[]) => {
      for (const { id } of batch) {
        pending.get(id)?.resolve()
        pending.delete(id)
      }
    })
    worker.on('error', fail)
    worker.on('exit', (code) => fail(new Error(`a channel-floor thread exited (code ${code})`)))
  }
  await Promise.all(workers.map((worker) => once(worker, 'online')))
  return {
    echo() {
      if (failure !== undefined) return Promise.reject(failure)
      const id = ++sent
      const message: Message = { type: 'echo', id }
      // Round robin, as an even balancer would place them.
      queues[id % threads]!.push(message)
      if (!scheduled) {
        scheduled = true
        setImmediate(flush)
      }
      return new Promise<void>((resolve, reject) => pending.set(id, { resolve, reject }))
    },
    async close() {
      for (const worker of workers) worker.removeAllListeners('exit')
      await Promise.all(workers.map((worker) => worker.terminate()))
    },
  }
}

export function createChannelFloor(plan: Plan, threads: number, progress: Progress): ChannelFloor {
  let latency: Promise<Figure> | undefined
  let throughput: Promise<Figure> | undefined
  return {
    latency: () =>
      (latency ??= (async () => {
        const channels = await openChannels(threads)
        try {
          const { warmup, samples } = plan.latency
          for (let i = 0; i < warmup; i++) await channels.echo()
          const times: number[] = []
          for (let i = 0; i < samples; i++) {
            const t0 = performance.now()
            await channels.echo()
            times.push(performance.now() - t0)
          }
          progress.advance(1)
          return figure(times, 'lower')
        } finally {
          await channels.close()
        }
      })()),
    throughput: (options) =>
      (throughput ??= (async () => {
        const channels = await openChannels(options.threads)
        try {
          const { inFlight, rounds } = plan.throughput
          const warmup = plan.throughput.warmup * ECHOES_PER_DELEGATION
          const total = plan.throughput.total * ECHOES_PER_DELEGATION
          await saturate(warmup, inFlight, () => channels.echo())
          const rates: number[] = []
          for (let r = 0; r < rounds; r++) {
            const t0 = performance.now()
            await saturate(total, inFlight, () => channels.echo())
            rates.push(total / ((performance.now() - t0) / 1000))
          }
          progress.advance(1)
          return figure(rates, 'higher')
        } finally {
          await channels.close()
        }
      })()),
  }
}
