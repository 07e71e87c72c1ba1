/**
 * S8: a child spinning in a module tool that never yields is cancelled by its parent; the
 * figure is the time from the abort to the settled result. The worker and process transports
 * get `abortGraceMs` for a cooperative stop, then terminate the thread or kill the process
 * (SIGKILL). Both are measured alike, their rounds taking turns, and judged on the same goal.
 * The remote transport's node does what the worker transport's host does, on its own thread:
 * it is measured with them and reported, with no goal. Inline it is not applicable: the spinning
 * tool holds the host's own thread, so nothing could even deliver the abort, and running it
 * would hang the benchmark.
 */
import { toolCallResponse } from '../../../index.js'
import { benchHost, defaultThreads, expectStop, HOST_MODEL, sleep, start, useScript, type BenchHost } from '../harness.js'
import type { Figure, Isolated } from '../types.js'
import { allMet, ratioOf, remoteFields, setupWithRemote, valueGoal, type Scenario } from './scenario.js'
import { figure } from '../measure/stats.js'

/** The transports judged on the goal. */
const JUDGED = ['worker', 'process'] as const

/** Time the tool is given to be well inside its loop before the abort. */
const SPIN_BEFORE_ABORT_MS = 20

async function abortOne(bench: BenchHost): Promise<number> {
  const script = useScript(bench, 1, [toolCallResponse('spin-1', 'spin', {})])
  const controller = new AbortController()
  const run = await start(bench, controller.signal)
  try {
    // The assistant message carrying the call reaches the host before the tool starts.
    for await (const event of run.events()) if (event.type === 'assistant/message') break
    await sleep(SPIN_BEFORE_ABORT_MS)
    const t0 = performance.now()
    controller.abort()
    const result = await run.result
    const elapsed = performance.now() - t0
    expectStop(result, 'aborted', bench.mode)
    return elapsed
  } finally {
    await run.dispose()
    script.done()
  }
}

export const s8: Scenario = {
  ids: ['S8'],
  label: 'S8 abort of a spinning child',
  units: (plan) => plan.abort.rounds + 1,
  async run(context) {
    const { rounds, graceMs } = context.plan.abort
    const threads = defaultThreads()
    const pool = { minThreads: threads, maxThreads: threads, childrenPerWorker: 1 }
    const remote = context.remote?.rig
    await remote?.nodes(pool)
    const modes: Isolated[] = remote ? [...JUDGED, 'remote'] : [...JUDGED]
    const benches = Object.fromEntries(modes.map((mode) => [mode, benchHost(mode, { pool, abortGraceMs: graceMs, ...(remote ? { remote } : {}) })])) as Record<Isolated, BenchHost>
    const times: Record<Isolated, number[]> = { worker: [], process: [], remote: [] }
    try {
      // Warm-up: module imported, paths compiled.
      for (const mode of modes) await abortOne(benches[mode])
      context.progress.advance(1)
      for (let r = 0; r < rounds; r++) {
        for (const mode of modes) {
          // Give the pool time to start the stopped runner's replacement, so each round starts on
          // a warm pool (the other runners are warm anyway, and the clock starts at the abort).
          await sleep(100)
          times[mode].push(await abortOne(benches[mode]))
        }
        context.progress.advance(1)
      }
    } finally {
      await Promise.all(modes.map((mode) => benches[mode].host.close()))
    }
    const figures: Record<(typeof JUDGED)[number], Figure> = { worker: figure(times.worker, 'lower'), process: figure(times.process, 'lower') }
    const { worker, process: proc } = figures
    const remoteFigure = remote ? figure(times.remote, 'lower') : undefined
    // The same goal on both transports: the grace, plus 50 ms to stop the runner and settle.
    const text = `<= abortGraceMs + 50 ms (${graceMs + 50} ms)`
    const goals = JUDGED.map((mode) => valueGoal(mode, text, '<=', figures[mode].median, graceMs + 50, graceMs + 50))
    return [
      {
        id: 'S8',
        title: 'abort of a spinning child to settled result',
        metric: 'ms from the parent signal aborting to the settled result',
        unit: 'ms',
        better: 'lower',
        model: HOST_MODEL,
        setup: setupWithRemote(context, { rounds, abortGraceMs: graceMs, spinBeforeAbortMs: SPIN_BEFORE_ABORT_MS, pool }),
        inline: null,
        worker,
        process: proc,
        ...remoteFields(context, { worker, remote: remoteFigure }),
        notApplicable: { inline: "an inline child's spinning tool holds the host's own thread, so the abort can never be delivered" },
        ratio: null,
        processRatio: { inline: null, worker: ratioOf(proc, worker) },
        goals,
        met: allMet(goals),
        extra: {
          overGraceMs: { median: worker.median - graceMs, p99: worker.p99 - graceMs },
          processOverGraceMs: { median: proc.median - graceMs, p99: proc.p99 - graceMs },
          ...(remoteFigure ? { remoteOverGraceMs: { median: remoteFigure.median - graceMs, p99: remoteFigure.p99 - graceMs } } : {}),
        },
      },
    ]
  },
}
