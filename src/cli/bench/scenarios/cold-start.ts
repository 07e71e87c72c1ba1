/**
 * S10: cold start. The first child on a fresh pool: the time from createHost() to the first
 * child's result, a one-step delegation with the host's ScriptedModel. On the worker transport
 * that wait is a thread starting and loading the library and the agent module; on the process
 * transport a Node process starting under the permission model and loading the same. Each round
 * builds a fresh host per transport with the default pool (minThreads runners started by
 * createHost, the first child placed on one of them), the transports taking turns.
 *
 * Inline is there for reference: the host imports the agent module once per process, so after
 * the warm-up round its figure is creating a host and one delegation. One untimed warm-up round
 * first, so every transport reads its files from the OS cache, as a running application does.
 * Reported, no goal.
 */
import { textResponse } from '../../../index.js'
import { benchHost, expectStop, HOST_MODEL, start, useScript } from '../harness.js'
import { figure } from '../measure/stats.js'
import { LOCAL_MODES, type LocalMode, type ScenarioResult } from '../types.js'
import { processRatioOf, ratioOf, type Scenario } from './scenario.js'

async function coldStart(mode: LocalMode): Promise<number> {
  const t0 = performance.now()
  // The default pool: benchHost adds only a long idle timeout, which a cold start never reaches.
  const bench = benchHost(mode)
  const script = useScript(bench, 1, [textResponse('done')])
  try {
    const run = await start(bench)
    const result = await run.result
    const elapsed = performance.now() - t0
    expectStop(result, 'completed', mode)
    await run.dispose()
    return elapsed
  } finally {
    script.done()
    await bench.host.close()
  }
}

export const s10: Scenario = {
  ids: ['S10'],
  label: 'S10 cold start',
  units: (plan) => plan.coldStart.rounds + 1,
  async run(context): Promise<ScenarioResult[]> {
    const { rounds } = context.plan.coldStart
    const times: Record<LocalMode, number[]> = { inline: [], worker: [], process: [] }
    for (const mode of LOCAL_MODES) await coldStart(mode)
    context.progress.advance(1)
    for (let r = 0; r < rounds; r++) {
      for (const mode of LOCAL_MODES) times[mode].push(await coldStart(mode))
      context.progress.advance(1)
    }
    const inline = figure(times.inline, 'lower')
    const worker = figure(times.worker, 'lower')
    const proc = figure(times.process, 'lower')
    return [
      {
        id: 'S10',
        title: "cold start: createHost() to the first child's result, fresh default pool",
        metric: "ms from createHost() to the first child's result (one model step)",
        unit: 'ms',
        better: 'lower',
        model: HOST_MODEL,
        setup: { rounds, warmupRounds: 1, steps: 1, pool: 'default (minThreads runners started by createHost)' },
        inline,
        worker,
        process: proc,
        ratio: ratioOf(worker, inline),
        processRatio: processRatioOf({ inline, worker, process: proc }),
        goals: [],
        met: true,
      },
    ]
  },
}
