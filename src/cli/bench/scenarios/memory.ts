/**
 * S7: memory per live delegation. Each round builds a fresh host, warms it with a small batch
 * (so every runner has imported the module and compiled the loop), reads memory, then holds
 * `children` delegations live on a pending model request and reads memory again.
 *
 * Two figures, both reported for every transport: RSS (the goal's figure: the whole host process's
 * growth, worker heaps included; for the process transport also the whole RSS of every runner
 * process, which the host cannot see and usage.ts reads from /proc: a runner's own ~40 MB is paid
 * for its children) and the main thread's heap + external (what
 * the host itself keeps per child; the children's own heaps on worker threads or in runner
 * processes are not in it). Reads follow `global.gc()` in the host when it is exposed (the
 * command re-executes itself with `--expose-gc` for S7), so the host's garbage does not count as
 * cost; a runner's heap, on a thread or in a process, is collected by its own GC only.
 */
import { setImmediate as tick } from 'node:timers/promises'
import { textResponse, type StreamChunk } from '../../../index.js'
import { benchHost, defaultThreads, delegate, expectStop, HOST_MODEL, sleep, start, useScript, type BenchHost } from '../harness.js'
import { runnerPids } from '../runners.js'
import { summarize, figure } from '../measure/stats.js'
import { LOCAL_MODES, type Figure, type LocalMode, type ScenarioResult } from '../types.js'
import { runnersRss } from '../measure/usage.js'
import { allMet, processRatioOf, ratioOf, valueGoal, type Scenario } from './scenario.js'

const MB = 1e6

interface Reading {
  /** The host process's RSS. */
  host: number
  /** The runner processes' RSS together (0 for inline and worker); null when they cannot be read. */
  runners: number | null
  heap: number
}

/** Per live delegation, in MB: the goal's RSS, and its parts. */
interface PerChild {
  /**
   * The goal's figure. Inline and worker: the host's RSS growth. Process: the host's growth plus
   * the runner processes' whole RSS, since a runner's own memory (Node, the package, the module)
   * is paid for its children alone.
   */
  rss: number | null
  hostRss: number
  /** The runner processes' RSS growth alone (process transport). */
  runnersRss: number | null
  /** The runner processes' whole RSS while the children are live, per child (process transport). */
  runnersWhole: number | null
  heap: number
}

async function settleAndRead(runners: readonly number[]): Promise<Reading> {
  for (let i = 0; i < 3; i++) {
    globalThis.gc?.()
    await tick()
  }
  const usage = process.memoryUsage()
  return { host: usage.rss, runners: runnersRss(runners), heap: usage.heapUsed + usage.external }
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

async function liveRound(mode: LocalMode, children: number): Promise<PerChild> {
  const pool = poolFor(children)
  const bench: BenchHost = benchHost(mode, { pool })
  try {
    const runners = await runnerPids(bench, pool.maxThreads)
    // Warm: the least-busy balancer spreads a batch this size over every runner.
    const warm = defaultThreads() * 8
    for (let i = 0; i < 3; i++) {
      const script = useScript(bench, warm, [textResponse('done')])
      await Promise.all(Array.from({ length: warm }, () => delegate(bench)))
      script.done()
    }
    const before = await settleAndRead(runners)

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
    const during = await settleAndRead(runners)
    open()
    for (const run of runs) expectStop(await run.result, 'completed', mode)
    await Promise.all(runs.map((run) => run.dispose()))
    script.done()
    const perChild = (after: number, was: number) => (after - was) / children / MB
    const runnersGrowth = during.runners === null || before.runners === null ? null : perChild(during.runners, before.runners)
    const hostRss = perChild(during.host, before.host)
    const runnersWhole = during.runners === null ? null : during.runners / children / MB
    const rss = mode !== 'process' ? hostRss : runnersWhole === null ? null : hostRss + runnersWhole
    return { rss, hostRss, runnersRss: runnersGrowth, runnersWhole, heap: perChild(during.heap, before.heap) }
  } finally {
    await bench.host.close()
  }
}

const samplesOf = (values: Array<number | null>) => values.filter((value): value is number => value !== null)

/** A figure of the samples, or null when the transport's memory could not be read. */
const figureOrNull = (values: Array<number | null>): Figure | null => (values.length > 0 && values.every((value) => value !== null) ? figure(samplesOf(values), 'lower') : null)

export const s7: Scenario = {
  ids: ['S7'],
  label: 'S7 memory per live delegation',
  units: (plan) => plan.memory.rounds,
  async run(context): Promise<ScenarioResult[]> {
    const { children, rounds } = context.plan.memory
    const readings: Record<LocalMode, PerChild[]> = { inline: [], worker: [], process: [] }
    for (let r = 0; r < rounds; r++) {
      for (const mode of LOCAL_MODES) readings[mode].push(await liveRound(mode, children))
      context.progress.advance(1)
    }
    const rss = (mode: LocalMode) => figureOrNull(readings[mode].map((reading) => reading.rss))
    const inline = rss('inline')!
    const worker = rss('worker')!
    const proc = rss('process')
    const goals = [valueGoal('worker', '<= 1.5 MB (RSS, whole process)', '<=', worker.median, 1.5, 1.5)]
    if (proc) goals.push(valueGoal('process', '<= 2 MB (host growth + runner processes whole)', '<=', proc.median, 2, 2))
    const heap = (mode: LocalMode) => {
      const samples = readings[mode].map((reading) => reading.heap)
      return { ...summarize(samples), samples }
    }
    return [
      {
        id: 'S7',
        title: `memory per live delegation at ${children.toLocaleString('en-US')} concurrent I/O-bound children`,
        metric: "MB (10^6 bytes) of RSS growth per live delegation (the process transport: the host's growth plus the runner processes' whole RSS)",
        unit: 'MB',
        better: 'lower',
        model: HOST_MODEL,
        setup: { children, rounds, pool: poolFor(children), gcExposed: typeof globalThis.gc === 'function' },
        inline,
        worker,
        process: proc,
        ...(proc ? {} : { notApplicable: { process: "the runner processes' RSS cannot be read here (it needs /proc), and the host's alone would leave the children out" } }),
        ratio: ratioOf(worker, inline),
        processRatio: processRatioOf({ inline, worker, process: proc }),
        goals,
        met: allMet(goals),
        extra: {
          heapPlusExternalMBPerDelegation: {
            note: "the main thread's heap + external only: the children's heaps on worker threads or in runner processes are in RSS, not here",
            inline: heap('inline'),
            worker: heap('worker'),
            process: heap('process'),
          },
          processRssSplitMBPerDelegation: {
            note: "the process transport per live delegation: the host's RSS growth, the runner processes' growth, and their whole RSS (the goal counts the whole)",
            host: figure(readings.process.map((reading) => reading.hostRss), 'lower'),
            runners: figureOrNull(readings.process.map((reading) => reading.runnersRss)),
            runnersWhole: figureOrNull(readings.process.map((reading) => reading.runnersWhole)),
          },
        },
      },
    ]
  },
}
