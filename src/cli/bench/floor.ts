/**
 * The raw floor: a bare piscina task with a transferred MessagePort and one message back,
 * measured in the same process run as S1-S3 and with the pool settings the library uses
 * (atomics disabled, same thread count), so a reader sees how much of a delegation's cost is
 * the thread hop itself. Measured lazily, once, whichever of S1-S3 asks first. For S5 the
 * floor is the same CPU work as bare tasks: what this machine's cores give in parallel.
 */
import { once } from 'node:events'
import { MessageChannel } from 'node:worker_threads'
import { Piscina } from 'piscina'
import { saturate } from './harness.js'
import type { Plan } from './plan.js'
import type { Progress } from './progress.js'
import { figure } from './stats.js'
import type { Figure } from './types.js'

const FLOOR_WORKER = new URL('./floor-worker.js', import.meta.url)

export interface FloorOptions {
  threads: number
  /** Tasks a thread may run at once, matched to the scenario it is the floor of. */
  concurrentTasksPerWorker: number
}

export interface Floor {
  /** One task at a time: `run()` to the message back, in ms. */
  latency(): Promise<Figure>
  /** Tasks per second with `inFlight` outstanding. */
  throughput(options: FloorOptions): Promise<Figure>
  /** Wall ms for `tasks` bare tasks of `iterations` of work each, all queued at once (the floor of S5). */
  parallelWork(options: { threads: number; tasks: number; iterations: number; rounds: number }): Promise<Figure>
}

function floorPool(options: FloorOptions): Piscina {
  return new Piscina({
    filename: FLOOR_WORKER.href,
    minThreads: options.threads,
    maxThreads: options.threads,
    concurrentTasksPerWorker: options.concurrentTasksPerWorker,
    idleTimeout: 600_000,
    atomics: 'disabled',
  })
}

/** One bare task: resolves with the time from `run()` to the port's message, after the task settles. */
async function oneTask(pool: Piscina): Promise<number> {
  const { port1, port2 } = new MessageChannel()
  const message = once(port1, 'message')
  const t0 = performance.now()
  const task = pool.run({ port: port2 }, { transferList: [port2] })
  await message
  const elapsed = performance.now() - t0
  await task
  port1.close()
  return elapsed
}

export function createFloor(plan: Plan, threads: number, progress: Progress): Floor {
  let latency: Promise<Figure> | undefined
  let throughput: Promise<Figure> | undefined
  return {
    latency: () =>
      (latency ??= (async () => {
        const pool = floorPool({ threads, concurrentTasksPerWorker: 1 })
        try {
          const { warmup, samples } = plan.latency
          for (let i = 0; i < warmup; i++) await oneTask(pool)
          const times: number[] = []
          for (let i = 0; i < samples; i++) times.push(await oneTask(pool))
          progress.advance(1)
          return figure(times, 'lower')
        } finally {
          await pool.destroy()
        }
      })()),
    throughput: (options) =>
      (throughput ??= (async () => {
        const pool = floorPool(options)
        try {
          const { warmup, total, inFlight, rounds } = plan.throughput
          await saturate(warmup, inFlight, () => oneTask(pool))
          const rates: number[] = []
          for (let r = 0; r < rounds; r++) {
            const t0 = performance.now()
            await saturate(total, inFlight, () => oneTask(pool))
            rates.push(total / ((performance.now() - t0) / 1000))
          }
          progress.advance(1)
          return figure(rates, 'higher')
        } finally {
          await pool.destroy()
        }
      })()),
    async parallelWork({ threads, tasks, iterations, rounds }) {
      const pool = floorPool({ threads, concurrentTasksPerWorker: 1 })
      const batch = async () => {
        const t0 = performance.now()
        await Promise.all(Array.from({ length: tasks }, () => pool.run({ iterations }, { name: 'burn' })))
        return performance.now() - t0
      }
      try {
        await batch()
        const walls: number[] = []
        for (let r = 0; r < rounds; r++) walls.push(await batch())
        progress.advance(1)
        return figure(walls, 'lower')
      } finally {
        await pool.destroy()
      }
    },
  }
}
