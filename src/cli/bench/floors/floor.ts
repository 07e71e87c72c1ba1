/**
 * The raw floor: a bare piscina task with a transferred MessagePort and one message back,
 * measured in the same process run as S1-S3 and with the pool settings the library uses
 * (atomics disabled, same thread count), so a reader sees how much of a delegation's cost is
 * the thread hop itself. Measured lazily, once, whichever of S1-S3 asks first. For S5 the
 * floor is the same CPU work as bare tasks, what this machine's cores give in parallel: a pool
 * whose batches S5 runs in turn with the transports' own.
 * piscina is a dev dependency, loaded when the floor is first asked for: where it is not
 * installed the floor is skipped (said once) and its figures are absent.
 */
import { once } from 'node:events'
import { MessageChannel } from 'node:worker_threads'
import type { Piscina } from 'piscina'
import { saturate } from '../harness.js'
import type { Plan } from '../plan.js'
import type { Progress } from '../report/progress.js'
import { figure } from '../measure/stats.js'
import type { Figure } from '../types.js'

const FLOOR_WORKER = new URL('./floor-worker.js', import.meta.url)

export interface FloorOptions {
  threads: number
  /** Tasks a thread may run at once, matched to the scenario it is the floor of. */
  concurrentTasksPerWorker: number
}

/** Each figure is undefined where piscina is not installed. */
export interface Floor {
  /** One task at a time: `run()` to the message back, in ms. */
  latency(): Promise<Figure | undefined>
  /** Tasks per second with `inFlight` outstanding. */
  throughput(options: FloorOptions): Promise<Figure | undefined>
  /** A pool of `threads` bare threads doing S5's CPU work, for batches that take turns with the transports'. */
  parallelWork(threads: number): Promise<ParallelWork | undefined>
}

export interface ParallelWork {
  /** Wall ms for `tasks` bare tasks of `iterations` of work each, all queued at once. */
  batch(tasks: number, iterations: number): Promise<number>
  close(): Promise<void>
}

/**
 * piscina's worker loads the task file with require() first. On Node 20.19+ that takes the
 * require(esm) path, which now and then died on a native assertion (module_wrap.cc,
 * CreateRequiredModuleFacade) and took the whole bench with it; with require(esm) off in the
 * floor's threads, piscina falls back to import().
 */
const FLOOR_EXEC_ARGV = process.allowedNodeEnvironmentFlags.has('--experimental-require-module')
  ? { execArgv: ['--no-experimental-require-module'] }
  : {}

type PiscinaClass = typeof Piscina
let loaded: Promise<PiscinaClass | undefined> | undefined

function loadPiscina(): Promise<PiscinaClass | undefined> {
  return (loaded ??= import('piscina').then(
    (module) => module.Piscina,
    (error: unknown) => {
      if ((error as { code?: unknown } | null)?.code !== 'ERR_MODULE_NOT_FOUND') throw error
      process.stderr.write('piscina is not installed (a dev dependency): the piscina floor was skipped\n')
      return undefined
    },
  ))
}

function floorPool(Pool: PiscinaClass, options: FloorOptions): Piscina {
  return new Pool({
    filename: FLOOR_WORKER.href,
    minThreads: options.threads,
    maxThreads: options.threads,
    concurrentTasksPerWorker: options.concurrentTasksPerWorker,
    idleTimeout: 600_000,
    atomics: 'disabled',
    ...FLOOR_EXEC_ARGV,
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
  let latency: Promise<Figure | undefined> | undefined
  let throughput: Promise<Figure | undefined> | undefined
  // A skipped floor still ends its unit of the progress bar.
  const skipped = () => {
    progress.advance(1)
    return undefined
  }
  return {
    latency: () =>
      (latency ??= (async () => {
        const Pool = await loadPiscina()
        if (!Pool) return skipped()
        const pool = floorPool(Pool, { threads, concurrentTasksPerWorker: 1 })
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
        const Pool = await loadPiscina()
        if (!Pool) return skipped()
        const pool = floorPool(Pool, options)
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
    async parallelWork(threads) {
      const Pool = await loadPiscina()
      if (!Pool) return undefined
      const pool = floorPool(Pool, { threads, concurrentTasksPerWorker: 1 })
      return {
        async batch(tasks, iterations) {
          const t0 = performance.now()
          await Promise.all(Array.from({ length: tasks }, () => pool.run({ iterations }, { name: 'burn' })))
          return performance.now() - t0
        },
        close: () => pool.destroy(),
      }
    },
  }
}
