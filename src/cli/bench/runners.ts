/**
 * The runner processes behind a process-transport host, for the readings of usage.ts. The
 * library publishes no pids, so the bench asks: children on the bench module's pid model, started
 * at once, are placed one per runner (the pool puts each start on the least loaded runner, and
 * the model holds each child long enough for the whole batch to be placed), and each answers with
 * the pid of the process it ran in.
 */
import { textOf } from '../../index.js'
import { expectStop, start, withProvider, type BenchHost } from './harness.js'

/** The bench module's model that answers with its process's pid (see module.ts). */
export const PID_MODEL = 'bench-pid'

const ATTEMPTS = 5

/**
 * The pids of the host's `count` runners (started up front: minThreads = maxThreads); none for
 * inline and worker, whose children run in the host's own process; the remote transport's node
 * processes, which the bench started itself and knows.
 */
export async function runnerPids(bench: BenchHost, count: number): Promise<number[]> {
  if (bench.mode === 'remote') return [...bench.nodePids]
  if (bench.mode !== 'process') return []
  const asker = withProvider(bench, PID_MODEL)
  const pids = new Set<number>()
  for (let attempt = 0; attempt < ATTEMPTS && pids.size < count; attempt++) {
    const runs = await Promise.all(Array.from({ length: count }, () => start(asker)))
    for (const run of runs) {
      const result = expectStop(await run.result, 'completed', bench.mode)
      await run.dispose()
      const pid = Number(textOf(result.output))
      if (!Number.isInteger(pid) || pid <= 0) throw new Error(`the pid model answered ${JSON.stringify(textOf(result.output))}, not a pid`)
      pids.add(pid)
    }
  }
  if (pids.size !== count) throw new Error(`found ${pids.size} runner processes of the ${count} expected: their CPU and memory cannot be read whole`)
  return [...pids]
}
