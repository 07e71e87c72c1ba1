/**
 * The BullMQ floor: what the remote transport's design costs with no library at all. A bare
 * BullMQ job round trip on the same Redis, in the same run: the bench adds a job (Queue.add, the
 * transport's job options), a worker in another process takes it and its processor publishes a
 * reply on Redis pub/sub, which the bench awaits. As many worker processes as the remote column
 * has nodes, each with the BullMQ concurrency of the scenario's nodes (their capacity). Measured
 * lazily, once, whichever of S1-S3 asks first, after the scenario's rounds: one round trip at a
 * time (S1, S2) and round trips per second with S3's in-flight count (S3).
 */
import { randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import type { FloorJob } from './bullmq-floor-worker.js'
import { saturate } from '../harness.js'
import type { Plan } from '../plan.js'
import type { Progress } from '../report/progress.js'
import { floorQueue, NODES, type RemoteRig } from '../remote.js'
import { startProcess } from '../spawned.js'
import { figure } from '../measure/stats.js'
import type { Figure } from '../types.js'

const FLOOR_WORKER = fileURLToPath(new URL('./bullmq-floor-worker.js', import.meta.url))

/** The remote transport's job options (bullmq/host.ts): nothing left in Redis, never retried. */
const JOB_OPTIONS = { removeOnComplete: true, removeOnFail: true, attempts: 1 } as const

/** A round trip not back within this long fails the floor (a stuck worker must not hang the run). */
const ROUND_TRIP_TIMEOUT_MS = 30_000

export interface BullmqFloor {
  /** One job at a time: Queue.add to the reply, in ms. */
  latency(): Promise<Figure>
  /** Round trips per second with the plan's throughput in-flight count. */
  throughput(): Promise<Figure>
}

interface Trips {
  /** Resolves once the job's reply is back. */
  trip(): Promise<void>
  close(): Promise<void>
}

async function openTrips(rig: RemoteRig): Promise<Trips> {
  const { bullmq, Redis } = rig.library
  const name = floorQueue(rig.info.queue)
  // A node's BullMQ concurrency is its capacity (node.ts): the running nodes', the scenario's.
  const concurrency = rig.pool.maxThreads * rig.pool.childrenPerWorker
  const workers = await Promise.allSettled(Array.from({ length: NODES }, () => startProcess('a BullMQ floor worker', [FLOOR_WORKER, rig.url, name, String(concurrency)], /^ready$/m)))
  const started = workers.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []))
  const failed = workers.find((result): result is PromiseRejectedResult => result.status === 'rejected')
  if (failed) {
    await Promise.all(started.map((worker) => worker.stop()))
    throw failed.reason
  }
  const publisher = new Redis(rig.url)
  const subscriber = new Redis(rig.url)
  let failure: Error | undefined
  const pending = new Map<string, { resolve(): void; reject(error: unknown): void }>()
  for (const client of [publisher, subscriber]) client.on('error', (error: Error) => void (failure = error))
  const queue = new bullmq.Queue<FloorJob>(name, { connection: publisher })
  queue.on('error', (error: Error) => void (failure = error))
  const reply = `${name}:reply:${randomBytes(4).toString('hex')}`
  subscriber.on('message', (_channel: string, id: string) => {
    pending.get(id)?.resolve()
    pending.delete(id)
  })
  await subscriber.subscribe(reply)
  let sent = 0
  return {
    async trip() {
      if (failure) throw failure
      const id = String(++sent)
      let timer: NodeJS.Timeout | undefined
      const back = new Promise<void>((resolve, reject) => {
        pending.set(id, { resolve, reject })
        timer = setTimeout(() => reject(new Error(`a BullMQ floor job was not answered within ${ROUND_TRIP_TIMEOUT_MS} ms`)), ROUND_TRIP_TIMEOUT_MS)
      })
      try {
        await queue.add('floor', { reply, id }, JOB_OPTIONS)
        await back
      } finally {
        clearTimeout(timer)
        pending.delete(id)
      }
    },
    async close() {
      await Promise.all(started.map((worker) => worker.stop()))
      await queue.close()
      await Promise.all([publisher.quit(), subscriber.quit()])
    },
  }
}

export function createBullmqFloor(plan: Plan, rig: RemoteRig, progress: Progress): BullmqFloor {
  let latency: Promise<Figure> | undefined
  let throughput: Promise<Figure> | undefined
  return {
    latency: () =>
      (latency ??= (async () => {
        const trips = await openTrips(rig)
        try {
          const { warmup, samples } = plan.latency
          for (let i = 0; i < warmup; i++) await trips.trip()
          const times: number[] = []
          for (let i = 0; i < samples; i++) {
            const t0 = performance.now()
            await trips.trip()
            times.push(performance.now() - t0)
          }
          progress.advance(1)
          return figure(times, 'lower')
        } finally {
          await trips.close()
        }
      })()),
    throughput: () =>
      (throughput ??= (async () => {
        const trips = await openTrips(rig)
        try {
          const { warmup, total, inFlight, rounds } = plan.throughput
          await saturate(warmup, inFlight, () => trips.trip())
          const rates: number[] = []
          for (let r = 0; r < rounds; r++) {
            const t0 = performance.now()
            await saturate(total, inFlight, () => trips.trip())
            rates.push(total / ((performance.now() - t0) / 1000))
          }
          progress.advance(1)
          return figure(rates, 'higher')
        } finally {
          await trips.close()
        }
      })()),
  }
}
