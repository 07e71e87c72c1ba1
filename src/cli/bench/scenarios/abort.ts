/**
 * S8: a child spinning in a module tool that never yields is cancelled by its parent; the
 * figure is the time from the abort to the settled result. The worker transport gets
 * `abortGraceMs` for a cooperative stop, then terminates the thread. Inline it is not
 * applicable: the spinning tool holds the host's own thread, so nothing could even deliver the
 * abort, and running it would hang the benchmark.
 */
import { toolCallResponse } from '../../../index.js'
import { benchHost, defaultThreads, expectStop, HOST_MODEL, sleep, start, useScript, type BenchHost } from '../harness.js'
import { allMet, valueGoal, type Scenario } from './scenario.js'
import { figure } from '../stats.js'

/** Time the tool is given to be well inside its loop before the abort. */
const SPIN_BEFORE_ABORT_MS = 20

async function abortOne(bench: BenchHost): Promise<number> {
  const script = useScript(bench, 1, [toolCallResponse('spin-1', 'spin', {})])
  const controller = new AbortController()
  const run = await start(bench, controller.signal)
  try {
    // The assistant message carrying the call reaches the host before the tool starts.
    while (!bench.host.agents.get(run.id)?.session.events.some((e) => e.type === 'assistant/message')) await sleep(1)
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
    const bench = benchHost('worker', { pool, abortGraceMs: graceMs })
    const times: number[] = []
    try {
      await abortOne(bench) // warm-up: module imported, paths compiled
      context.progress.advance(1)
      for (let r = 0; r < rounds; r++) {
        // Give piscina time to replace the terminated thread, so each round starts on a warm pool.
        await sleep(100)
        times.push(await abortOne(bench))
        context.progress.advance(1)
      }
    } finally {
      await bench.host.close()
    }
    const worker = figure(times, 'lower')
    const goal = valueGoal(`<= abortGraceMs + 50 ms (${graceMs + 50} ms)`, '<=', worker.median, graceMs + 50, graceMs + 50)
    return [
      {
        id: 'S8',
        title: 'abort of a spinning child to settled result',
        metric: 'ms from the parent signal aborting to the settled result',
        unit: 'ms',
        better: 'lower',
        model: HOST_MODEL,
        setup: { rounds, abortGraceMs: graceMs, spinBeforeAbortMs: SPIN_BEFORE_ABORT_MS, pool },
        inline: null,
        inlineNote: "not applicable: an inline child's spinning tool holds the host's own thread, so the abort can never be delivered",
        worker,
        ratio: null,
        goals: [goal],
        met: allMet([goal]),
        extra: { overGraceMs: { median: worker.median - graceMs, p99: worker.p99 - graceMs } },
      },
    ]
  },
}
