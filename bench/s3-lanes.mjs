/** What the host profiles share: S3's workload (zero model latency, a host ScriptedModel, 64 in flight) on one host. */
import { availableParallelism } from 'node:os'
import { createHost, ScriptedModel, textResponse } from '../dist/index.js'

export const IN_FLIGHT = 64
const BENCH_MODULE = new URL('../dist/cli/bench/module.js', import.meta.url)

/** A host of one isolation with the bench's pool and an agent to delegate from. */
export function s3Host(isolation) {
  const threads = Math.max(1, Math.round(availableParallelism() * 1.5))
  const pool = { minThreads: threads, maxThreads: threads, childrenPerWorker: Math.ceil(IN_FLIGHT / threads), idleTimeoutMs: 600_000 }
  const host = createHost({ isolation, agentModule: BENCH_MODULE, ...(isolation === 'inline' ? {} : { pool }) })
  return { isolation, host, parent: host.createAgent({ options: { provider: 'bench', model: 'scripted' } }) }
}

/** `total` one-step delegations, IN_FLIGHT at a time, each started, awaited and disposed. */
export async function s3Round(bench, total) {
  const model = new ScriptedModel(Array.from({ length: total }, () => textResponse('done')))
  const unregister = bench.host.models.register('bench', model)
  let next = 0
  const lane = async () => {
    while (next++ < total) {
      const run = await bench.host.spawn.start({ prompt: `profile task ${next}`, parent: bench.parent })
      const result = await run.result
      await run.dispose()
      if (result.stopReason !== 'completed') throw new Error(`a ${bench.isolation} child ended ${result.stopReason}: ${result.diagnostic}`)
    }
  }
  try {
    await Promise.all(Array.from({ length: IN_FLIGHT }, lane))
  } finally {
    unregister()
  }
}
