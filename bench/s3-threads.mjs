#!/usr/bin/env node
/**
 * Where S3's CPU goes by kind of thread, after a warm-up of a given length: the host's main
 * thread, V8's and libuv's helper threads (those this process had before the host was created),
 * and the runner threads (those it has since). S3's workload (a host ScriptedModel, zero latency,
 * 64 in flight) on one host: `--threads 0` is inline, any other count a worker pool of that many
 * threads with a slot for every lane. CPU is read from /proc/self/task, so other processes' load
 * does not count; context switches come from the same files.
 *
 *   npm run build && node bench/s3-threads.mjs [--threads 3] [--warmup 20000] [--total 8000] [--retain]
 *
 * `--retain` uses the default store, which keeps every transcript after its child is disposed.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { createHost, createMemoryStore, ScriptedModel, textResponse } from '../dist/index.js'

const { values } = parseArgs({
  options: {
    threads: { type: 'string', default: '3' },
    warmup: { type: 'string', default: '20000' },
    total: { type: 'string', default: '8000' },
    retain: { type: 'boolean', default: false },
  },
})
const THREADS = Number(values.threads)
const IN_FLIGHT = 64

const helpers = new Set(readdirSync('/proc/self/task'))
const store = values.retain ? {} : { store: createMemoryStore({ retain: false }) }
const agentModule = new URL('../dist/cli/bench/module.js', import.meta.url)
const host =
  THREADS === 0
    ? createHost({ ...store, isolation: 'inline', agentModule })
    : createHost({ ...store, isolation: 'worker', agentModule, pool: { minThreads: THREADS, maxThreads: THREADS, childrenPerWorker: Math.ceil(IN_FLIGHT / THREADS), idleTimeoutMs: 600_000 } })
const parent = host.createAgent({ options: { provider: 'bench', model: 'scripted' } })

async function round(total) {
  const unregister = host.models.register('bench', new ScriptedModel(Array.from({ length: total }, () => textResponse('done'))))
  let next = 0
  const lane = async () => {
    while (next++ < total) {
      const run = await host.spawn.start({ prompt: 'p', parent })
      const result = await run.result
      await run.dispose()
      if (result.stopReason !== 'completed') throw new Error(`a child ended ${result.stopReason}: ${result.diagnostic}`)
    }
  }
  await Promise.all(Array.from({ length: IN_FLIGHT }, lane))
  unregister()
}

/** CPU in µs and context switches, by kind of thread. */
function threads() {
  const kinds = { main: 0, helpers: 0, runners: 0, voluntary: 0, involuntary: 0 }
  for (const task of readdirSync('/proc/self/task')) {
    try {
      const stat = readFileSync(`/proc/self/task/${task}/stat`, 'utf8').split(') ')[1].split(' ')
      const status = readFileSync(`/proc/self/task/${task}/status`, 'utf8')
      const kind = task === String(process.pid) ? 'main' : helpers.has(task) ? 'helpers' : 'runners'
      kinds[kind] += (Number(stat[11]) + Number(stat[12])) * 10_000 // clock ticks of 10 ms
      kinds.voluntary += Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)[1])
      kinds.involuntary += Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(status)[1])
    } catch {
      // a thread that ended between the listing and the read
    }
  }
  return kinds
}

try {
  await round(Number(values.warmup))
  const total = Number(values.total)
  const before = threads()
  const t0 = performance.now()
  await round(total)
  const elapsed = performance.now() - t0
  const after = threads()
  const per = (kind) => ((after[kind] - before[kind]) / total).toFixed(kind.endsWith('voluntary') ? 2 : 0)
  console.log(`${THREADS === 0 ? 'inline' : `worker, ${THREADS} threads`}, ${values.warmup} warm-up${values.retain ? ', transcripts kept' : ''}: ${Math.round((total / elapsed) * 1000)}/s; CPU µs a delegation: main ${per('main')}, helpers ${per('helpers')}, runners ${per('runners')}; context switches a delegation: voluntary ${per('voluntary')}, involuntary ${per('involuntary')}`)
} finally {
  await host.close()
}
