/**
 * S1 and S2: one delegation at a time on a warm pool. A host per transport (inline, worker,
 * process, and remote when the run has it), side by side, taking turns in batches, so drift in
 * the machine (frequency, other load) hits them all alike.
 */
import { textResponse } from '../../../index.js'
import { benchHost, defaultThreads, delegate, expectStop, HOST_MODEL, start, useScript, type BenchHost, type Variant } from '../harness.js'
import type { Plan } from '../plan.js'
import type { ScenarioResult } from '../types.js'
import { allMet, processRatioOf, ratioOf, remoteFields, setupWithRemote, valueGoal, withRemote, type Scenario, type ScenarioContext } from './scenario.js'
import { figure } from '../measure/stats.js'

/** Times one delegation's part of interest, in ms. */
type Measure = (bench: BenchHost) => Promise<number>

/** S1: `start()` until it fulfils with the published run; the rest of the delegation is untimed. */
const startToPublished: Measure = async (bench) => {
  const t0 = performance.now()
  const run = await start(bench)
  const elapsed = performance.now() - t0
  expectStop(await run.result, 'completed', bench.mode)
  await run.dispose()
  return elapsed
}

/** S2: the whole one-step delegation, start → result → dispose. */
const wholeDelegation: Measure = async (bench) => {
  const t0 = performance.now()
  await delegate(bench)
  return performance.now() - t0
}

const batches = (plan: Plan) => Math.ceil(plan.latency.samples / plan.latency.batch)

async function alternate(context: ScenarioContext, measure: Measure, variants: readonly Variant[]): Promise<Record<Variant, number[]>> {
  const { warmup, samples, batch } = context.plan.latency
  const threads = defaultThreads()
  const remote = context.remote?.rig
  // S1 and S2 ask for the same nodes: S2 keeps S1's.
  await remote?.nodes({ maxThreads: threads, childrenPerWorker: 1 })
  const hosts = variants.map((variant) => benchHost(variant, { pool: { minThreads: threads, maxThreads: threads }, ...(remote ? { remote } : {}) }))
  const times: Record<Variant, number[]> = { inline: [], worker: [], process: [], remote: [], workerModuleModel: [] }
  try {
    for (const bench of hosts) {
      const script = useScript(bench, warmup, [textResponse('done')])
      for (let i = 0; i < warmup; i++) await measure(bench)
      script.done()
    }
    for (let taken = 0; taken < samples; taken += batch) {
      const size = Math.min(batch, samples - taken)
      for (const bench of hosts) {
        const script = useScript(bench, size, [textResponse('done')])
        for (let i = 0; i < size; i++) times[bench.variant].push(await measure(bench))
        script.done()
      }
      context.progress.advance(1)
    }
  } finally {
    await Promise.all(hosts.map(({ host }) => host.close()))
  }
  return times
}

function setup(context: ScenarioContext): Record<string, unknown> {
  const threads = defaultThreads()
  return setupWithRemote(context, { ...context.plan.latency, concurrency: 1, steps: 1, pool: { minThreads: threads, maxThreads: threads, childrenPerWorker: 1 } })
}

/** The remote figure of a run that measured it. */
const remoteOf = (context: ScenarioContext, times: Record<Variant, number[]>) => (context.remote ? figure(times.remote, 'lower') : undefined)

export const s1: Scenario = {
  ids: ['S1'],
  label: 'S1 start() to published',
  units: batches,
  async run(context): Promise<ScenarioResult[]> {
    const times = await alternate(context, startToPublished, withRemote(context, ['inline', 'worker', 'process'] as const))
    const inline = figure(times.inline, 'lower')
    const worker = figure(times.worker, 'lower')
    const proc = figure(times.process, 'lower')
    const remote = remoteOf(context, times)
    const goal = valueGoal('worker', 'p50 <= 0.5 ms', '<=', worker.median, 0.5, 0.5)
    return [
      {
        id: 'S1',
        title: 'start() to published run, warm pool, one at a time',
        metric: 'ms from start() to the fulfilled run',
        unit: 'ms',
        better: 'lower',
        model: HOST_MODEL,
        setup: setup(context),
        inline,
        worker,
        process: proc,
        floor: await context.floor.latency(),
        channelFloor: await context.channelFloor.latency(),
        ...remoteFields(context, { worker, remote }, await context.remote?.floor.latency()),
        ratio: ratioOf(worker, inline),
        processRatio: processRatioOf({ inline, worker, process: proc }),
        goals: [goal],
        met: allMet([goal]),
      },
    ]
  },
}

export const s2: Scenario = {
  ids: ['S2'],
  label: 'S2 one-step delegation',
  units: batches,
  async run(context): Promise<ScenarioResult[]> {
    const times = await alternate(context, wholeDelegation, withRemote(context, ['inline', 'worker', 'workerModuleModel', 'process'] as const))
    const inline = figure(times.inline, 'lower')
    const worker = figure(times.worker, 'lower')
    const proc = figure(times.process, 'lower')
    const remote = remoteOf(context, times)
    const overhead = worker.median - inline.median
    const processOverhead = proc.median - inline.median
    const goals = [
      valueGoal('worker', 'p50 overhead over inline <= 0.5 ms', '<=', overhead, 0.5, inline.median + 0.5),
      valueGoal('process', 'p50 overhead over inline <= 1 ms', '<=', processOverhead, 1, inline.median + 1),
    ]
    // Remote is read against the worker: what the queue and Redis add to a thread hop.
    if (remote) goals.push(valueGoal('remote', 'p50 overhead over worker <= 2 ms', '<=', remote.median - worker.median, 2, worker.median + 2))
    return [
      {
        id: 'S2',
        title: 'one-step delegation start → result → dispose, one at a time',
        metric: 'ms for one whole delegation',
        unit: 'ms',
        better: 'lower',
        model: HOST_MODEL,
        setup: setup(context),
        inline,
        worker,
        process: proc,
        floor: await context.floor.latency(),
        channelFloor: await context.channelFloor.latency(),
        ...remoteFields(context, { worker, remote }, await context.remote?.floor.latency()),
        workerModuleModel: figure(times.workerModuleModel, 'lower'),
        ratio: ratioOf(worker, inline),
        processRatio: processRatioOf({ inline, worker, process: proc }),
        goals,
        met: allMet(goals),
        extra: {
          overheadP50Ms: overhead,
          overheadP99Ms: worker.p99 - inline.p99,
          processOverheadP50Ms: processOverhead,
          processOverheadP99Ms: proc.p99 - inline.p99,
          ...(remote ? { remoteOverWorkerP50Ms: remote.median - worker.median, remoteOverWorkerP99Ms: remote.p99 - worker.p99 } : {}),
        },
      },
    ]
  },
}
