#!/usr/bin/env node
/**
 * Where an S4 round's time goes, as the bench runs its rounds (5,000 delegations through 1,000
 * lanes, two host-model steps of 20 ms with a module tool between them): every completion is
 * timed, so a round splits into its start (all 1,000 lanes starting at once: when the first
 * delegation, and the first 1,000, are done), its steady middle (the rate between the first and
 * the last 1,000 completions) and its drain (from the last 1,000 to the end, the lanes no longer
 * refilled). Each figure is the median of the rounds, after a warm-up as long as the bench's.
 *
 *   npm run build && node bench/s4-rounds.mjs [--threads 3] [--total 5000] [--rounds 5] [--warmup 20000]
 *
 * `--threads 0` is inline; run it and a worker pool in turns, one process each, and compare
 * within a pair.
 */
import { parseArgs } from 'node:util'
import { createHost, createMemoryStore, textResponse, toolCallResponse } from '../dist/index.js'
import { delegate, useScript } from '../dist/cli/bench/harness.js'

const { values } = parseArgs({
  options: { threads: { type: 'string', default: '3' }, total: { type: 'string', default: '5000' }, rounds: { type: 'string', default: '5' }, warmup: { type: 'string', default: '20000' } },
})
const THREADS = Number(values.threads)
const TOTAL = Number(values.total)
const IN_FLIGHT = 1000
if (TOTAL <= 2 * IN_FLIGHT) throw new Error(`--total must be more than ${2 * IN_FLIGHT}: a round's start and drain are ${IN_FLIGHT} completions each`)
const STEPS = [
  { delayMs: 20, chunks: toolCallResponse('call-1', 'burn', { iterations: 0 }) },
  { delayMs: 20, chunks: textResponse('done') },
]

const agentModule = new URL('../dist/cli/bench/module.js', import.meta.url)
const pool = { minThreads: THREADS, maxThreads: THREADS, childrenPerWorker: Math.ceil(IN_FLIGHT / Math.max(1, THREADS)), idleTimeoutMs: 600_000 }
const host = createHost({ store: createMemoryStore({ retain: false }), agentModule, ...(THREADS === 0 ? { isolation: 'inline' } : { isolation: 'worker', pool }) })
const variant = THREADS === 0 ? 'inline' : 'worker'
const bench = { host, parent: host.createAgent({ options: { provider: 'bench', model: 'scripted' } }), variant, mode: variant }

/** One round of `total` through the lanes: each completion's time since the round began (ms). */
async function round(total) {
  const script = useScript(bench, total, STEPS)
  const done = []
  let next = 0
  const t0 = performance.now()
  const lane = async () => {
    while (next < total) {
      next++
      await delegate(bench)
      done.push(performance.now() - t0)
    }
  }
  await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, total) }, lane))
  script.done()
  return done
}

/** A round's parts: the first and the last 1,000 completions apart from the steady middle. */
function parts(done) {
  const end = done.at(-1)
  const firstK = done[IN_FLIGHT - 1]
  const lastK = done[TOTAL - IN_FLIGHT - 1]
  return { rate: TOTAL / (end / 1000), steady: (TOTAL - 2 * IN_FLIGHT) / ((lastK - firstK) / 1000), first: done[0], firstK, drain: end - lastK, end }
}

const median = (values) => values.toSorted((a, b) => a - b)[Math.floor(values.length / 2)]

try {
  await round(Number(values.warmup))
  const rounds = []
  for (let r = 0; r < Number(values.rounds); r++) rounds.push(parts(await round(TOTAL)))
  const of = (key) => Math.round(median(rounds.map((row) => row[key])))
  console.log(
    `S4 rounds of ${TOTAL.toLocaleString('en-US')}, ${variant}${THREADS ? ` (${THREADS} threads)` : ''}: ${of('rate')}/s over the round, ${of('steady')}/s between its first and last ${IN_FLIGHT.toLocaleString('en-US')}; ` +
      `first completion at ${of('first')} ms, the first ${IN_FLIGHT.toLocaleString('en-US')} by ${of('firstK')} ms; drain (the last ${IN_FLIGHT.toLocaleString('en-US')}) ${of('drain')} ms; round ${of('end')} ms`,
  )
} finally {
  await host.close()
}
