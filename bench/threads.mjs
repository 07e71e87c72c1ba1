#!/usr/bin/env node
/**
 * Where a scenario's CPU goes by kind of thread, after a warm-up of a given length: the host's
 * main thread, V8's and libuv's helper threads (those this process had before the host was
 * created), and the runner threads (those it has since). CPU is read from /proc/self/task, so
 * another process's load does not count; context switches come from the same files, and the
 * main thread's event-loop utilization says whether it was the bottleneck (near 1: it was busy,
 * on a core or waiting for one, for the whole run).
 *
 * Workloads, each the bench scenario's own (`src/cli/bench`), on one host:
 *   S3    zero model latency, a host ScriptedModel, 64 in flight; per delegation
 *   S4    two host model steps of 20 ms with a module tool between them, 1,000 in flight; per delegation
 *   S9u   1,000 children at once, each streaming 100 chunks at 50 chunks/s from a user-written
 *         model on the host; per chunk (`--total` is the number of batches; `--chunks` changes
 *         the stream's length and keeps it about 2 s, which splits a chunk's cost from a child's)
 *   S9um  the same model in the agent module, where the child runs; per chunk
 *
 * `--threads 0` is inline, any other count a worker pool of that many threads with a slot for
 * every child in flight.
 *
 *   npm run build && node bench/threads.mjs [--workload S3] [--threads 3] [--warmup 20000] [--total 8000] [--children N] [--chunks N] [--retain] [--nice N] [--window FILE]
 *
 * `--window FILE` writes the timed round's bounds (CLOCK_MONOTONIC seconds, as `perf record -k
 * CLOCK_MONOTONIC` stamps its samples), its units, the main thread's id and the runner threads'
 * ids, for `bench/perf-split.mjs` to split a profile by kind of thread and kind of work.
 *
 * `--children` changes how many are in flight (a smaller S9u for valgrind's one core, say);
 * `--retain` uses the default store, which keeps every transcript after its child is disposed;
 * `--nice` is the pool's `niceIncrement` (how much lower than the host's thread the runners are scheduled).
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { createHost, createMemoryStore, textResponse, toolCallResponse } from '../dist/index.js'
import { delegate, saturate, useScript } from '../dist/cli/bench/harness.js'
import { streamModelId } from '../dist/cli/bench/stream-script.js'
import { USER_HOST_MODEL, USER_STREAM_MODEL, userStreamModel } from '../dist/cli/bench/user-model.js'

const { values } = parseArgs({
  options: {
    workload: { type: 'string', default: 'S3' },
    threads: { type: 'string', default: '3' },
    warmup: { type: 'string' },
    total: { type: 'string' },
    children: { type: 'string' },
    chunks: { type: 'string', default: '100' },
    retain: { type: 'boolean', default: false },
    nice: { type: 'string', default: '0' },
    window: { type: 'string' },
  },
})
const THREADS = Number(values.threads)
// About 2 s whatever the length (the model id carries whole milliseconds).
const STREAM = { chunks: Number(values.chunks), intervalMs: Math.max(1, Math.round(2000 / Number(values.chunks))) }

/** Each workload: children in flight, the unit CPU is counted in, and one round of `total`. */
const WORKLOADS = {
  S3: { inFlight: 64, unit: 'delegation', warmup: 20000, total: 8000, steps: [textResponse('done')] },
  S4: {
    inFlight: 1000,
    unit: 'delegation',
    warmup: 20000,
    total: 10000,
    steps: [
      { delayMs: 20, chunks: toolCallResponse('call-1', 'burn', { iterations: 0 }) },
      { delayMs: 20, chunks: textResponse('done') },
    ],
  },
  S9u: { inFlight: 1000, unit: 'chunk', warmup: 2, total: 3, provider: USER_HOST_MODEL },
  S9um: { inFlight: 1000, unit: 'chunk', warmup: 2, total: 3, provider: USER_STREAM_MODEL },
}
const workload = WORKLOADS[values.workload]
if (!workload) throw new Error(`--workload is one of ${Object.keys(WORKLOADS).join(', ')}, not ${values.workload}`)
if (values.children) workload.inFlight = Number(values.children)

const helpers = new Set(readdirSync('/proc/self/task'))
const store = values.retain ? {} : { store: createMemoryStore({ retain: false }) }
const agentModule = new URL('../dist/cli/bench/module.js', import.meta.url)
const pool = { minThreads: THREADS, maxThreads: THREADS, childrenPerWorker: Math.ceil(workload.inFlight / Math.max(1, THREADS)), idleTimeoutMs: 600_000, niceIncrement: Number(values.nice) }
const host = createHost({ ...store, agentModule, ...(THREADS === 0 ? { isolation: 'inline' } : { isolation: 'worker', pool }) })
const variant = THREADS === 0 ? 'inline' : 'worker'

/** One round of `total` units: delegations through the lanes, or batches of streaming children. */
async function round(total) {
  if (workload.provider) {
    const parent = host.createAgent({ options: { provider: workload.provider, model: streamModelId(STREAM) } })
    for (let batch = 0; batch < total; batch++) await Promise.all(Array.from({ length: workload.inFlight }, () => delegate({ host, parent, variant, mode: variant })))
    return total * workload.inFlight * (STREAM.chunks + 1) // the finish is a chunk too
  }
  const bench = { host, parent: host.createAgent({ options: { provider: 'bench', model: 'scripted' } }), variant, mode: variant }
  const script = useScript(bench, total, workload.steps)
  await saturate(total, workload.inFlight, () => delegate(bench))
  script.done()
  return total
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
  if (workload.provider) host.models.register(USER_HOST_MODEL, userStreamModel)
  const warmup = Number(values.warmup ?? workload.warmup)
  await round(warmup)
  const before = threads()
  const loop = performance.eventLoopUtilization()
  const t0 = performance.now()
  const start = process.hrtime.bigint()
  const units = await round(Number(values.total ?? workload.total))
  const end = process.hrtime.bigint()
  const elapsed = performance.now() - t0
  const { utilization } = performance.eventLoopUtilization(loop)
  const after = threads()
  if (values.window) {
    const runners = readdirSync('/proc/self/task').filter((task) => task !== String(process.pid) && !helpers.has(task))
    const seconds = (ns) => (Number(ns) / 1e9).toFixed(9)
    writeFileSync(values.window, JSON.stringify({ start: seconds(start), end: seconds(end), units, unit: workload.unit, main: process.pid, runners: runners.map(Number) }) + '\n')
  }
  const per = (kind) => ((after[kind] - before[kind]) / units).toFixed(kind.endsWith('voluntary') ? 2 : workload.unit === 'chunk' ? 2 : 0)
  console.log(
    `${values.workload}, ${THREADS === 0 ? 'inline' : `worker, ${THREADS} threads${pool.niceIncrement ? `, runners nice +${pool.niceIncrement}` : ''}`}, ${warmup} warm-up${values.retain ? ', transcripts kept' : ''}: ` +
      `${Math.round((units / elapsed) * 1000)} ${workload.unit}s/s; main thread's event-loop utilization ${utilization.toFixed(2)}; ` +
      `CPU µs a ${workload.unit}: main ${per('main')}, helpers ${per('helpers')}, runners ${per('runners')}; ` +
      `context switches a ${workload.unit}: voluntary ${per('voluntary')}, involuntary ${per('involuntary')}`,
  )
} finally {
  await host.close()
}
