/**
 * S7: memory per live delegation. Each round builds a fresh host, warms it with a small batch
 * (so every worker thread has imported the module and compiled the loop), reads memory, then
 * holds `children` delegations live on a pending model request and reads memory again.
 *
 * Two figures, both reported for both transports: RSS (the whole process, worker heaps
 * included: the figure the goal is judged on) and the main thread's heap + external (what the
 * host itself keeps per child; on the worker transport the children's own heaps are not in it).
 * Reads follow `global.gc()` when it is exposed (the command re-executes itself with
 * `--expose-gc` for S7), so garbage does not count as cost.
 */
import { setImmediate as tick } from 'node:timers/promises'
import { textResponse, type StreamChunk } from '../../../index.js'
import { benchHost, defaultThreads, delegate, expectStop, HOST_MODEL, sleep, start, useScript, type BenchHost } from '../harness.js'
import { summarize, figure } from '../stats.js'
import type { Mode, ScenarioResult } from '../types.js'
import { allMet, ratioOf, valueGoal, type Scenario } from './scenario.js'

const MB = 1e6

interface Reading {
  rss: number
  heap: number
}

async function settleAndRead(): Promise<Reading> {
  for (let i = 0; i < 3; i++) {
    globalThis.gc?.()
    await tick()
  }
  const usage = process.memoryUsage()
  return { rss: usage.rss, heap: usage.heapUsed + usage.external }
}

async function until(condition: () => boolean, what: string, timeoutMs = 120_000): Promise<void> {
  const deadline = performance.now() + timeoutMs
  while (!condition()) {
    if (performance.now() > deadline) throw new Error(`S7 timed out waiting for ${what}`)
    await sleep(5)
  }
}

function poolFor(children: number) {
  const threads = defaultThreads()
  return { minThreads: threads, maxThreads: threads, childrenPerWorker: Math.ceil(children / threads) }
}

async function liveRound(mode: Mode, children: number): Promise<{ rss: number; heap: number }> {
  const bench: BenchHost = benchHost(mode, { pool: poolFor(children) })
  try {
    // Warm: the least-busy balancer spreads a batch this size over every thread.
    const warm = defaultThreads() * 8
    for (let i = 0; i < 3; i++) {
      const script = useScript(bench, warm, [textResponse('done')])
      await Promise.all(Array.from({ length: warm }, () => delegate(bench)))
      script.done()
    }
    const before = await settleAndRead()

    let open = () => {}
    const gate = new Promise<void>((resolve) => (open = resolve))
    const held = async (): Promise<StreamChunk[]> => {
      await gate
      return textResponse('done')
    }
    const script = useScript(bench, children, [held])
    const runs = await Promise.all(Array.from({ length: children }, () => start(bench)))
    // Live means every child is in its turn, waiting on its model request.
    await until(() => script.model.requests.length === children, `${children} live ${mode} children`)
    const during = await settleAndRead()
    open()
    for (const run of runs) expectStop(await run.result, 'completed', mode)
    await Promise.all(runs.map((run) => run.dispose()))
    script.done()
    return { rss: (during.rss - before.rss) / children / MB, heap: (during.heap - before.heap) / children / MB }
  } finally {
    await bench.host.close()
  }
}

export const s7: Scenario = {
  ids: ['S7'],
  label: 'S7 memory per live delegation',
  units: (plan) => plan.memory.rounds,
  async run(context): Promise<ScenarioResult[]> {
    const { children, rounds } = context.plan.memory
    const rss: Record<Mode, number[]> = { inline: [], worker: [] }
    const heap: Record<Mode, number[]> = { inline: [], worker: [] }
    for (let r = 0; r < rounds; r++) {
      for (const mode of ['inline', 'worker'] as const) {
        const reading = await liveRound(mode, children)
        rss[mode].push(reading.rss)
        heap[mode].push(reading.heap)
      }
      context.progress.advance(1)
    }
    const inline = figure(rss.inline, 'lower')
    const worker = figure(rss.worker, 'lower')
    const goal = valueGoal('<= 1.5 MB (RSS, whole process)', '<=', worker.median, 1.5, 1.5)
    return [
      {
        id: 'S7',
        title: `memory per live delegation at ${children.toLocaleString('en-US')} concurrent I/O-bound children`,
        metric: 'MB (10^6 bytes) of RSS growth per live delegation',
        unit: 'MB',
        better: 'lower',
        model: HOST_MODEL,
        setup: { children, rounds, pool: poolFor(children), gcExposed: typeof globalThis.gc === 'function' },
        inline,
        worker,
        ratio: ratioOf(worker, inline),
        goals: [goal],
        met: allMet([goal]),
        extra: {
          heapPlusExternalMBPerDelegation: {
            note: "the main thread's heap + external only: on the worker transport the children's heaps are in RSS, not here",
            inline: { ...summarize(heap.inline), samples: heap.inline },
            worker: { ...summarize(heap.worker), samples: heap.worker },
          },
        },
      },
    ]
  },
}
