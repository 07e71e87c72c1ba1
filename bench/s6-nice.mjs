#!/usr/bin/env node
/**
 * S5 and S6's workload (32 children on the bench's pool, each running a module tool that burns
 * 50 ms of CPU) on two hosts taking turns, batch by batch: one with the runners at the host's
 * priority, one with `pool.niceIncrement` N. Per batch, its wall time and the host's event-loop
 * delay (p99 and max, as S6 reads it). Runners that yield should let the host's thread run when
 * it wakes, at little cost to the batch's wall.
 *
 *   npm run build && node bench/s6-nice.mjs [--nice 19] [--isolation worker|process] [--rounds 6]
 */
import { parseArgs } from 'node:util'
import { benchHost, defaultThreads } from '../dist/cli/bench/harness.js'
import { delayMs, loopMonitor, loopTurns } from '../dist/cli/bench/measure/loop-delay.js'
import { burnBatch } from '../dist/cli/bench/scenarios/cpu.js'
import { calibrate } from '../dist/cli/bench/work.js'

const { values } = parseArgs({
  options: { nice: { type: 'string', default: '19' }, isolation: { type: 'string', default: 'worker' }, rounds: { type: 'string', default: '6' } },
})
const NICE = Number(values.nice)
const CHILDREN = 32

const iterations = calibrate(50)
const threads = defaultThreads()
const hosts = [0, NICE].map((niceIncrement) => ({
  niceIncrement,
  bench: benchHost(values.isolation, { pool: { minThreads: threads, maxThreads: threads, childrenPerWorker: 1, niceIncrement } }),
  rounds: [],
}))
try {
  // The bench's warm-up: the runners import the module and optimize their code, then the loop.
  for (const { bench } of hosts) {
    for (let done = 0; done < 2000; done += CHILDREN) await burnBatch(bench, CHILDREN, 0)
    await burnBatch(bench, CHILDREN, iterations)
  }
  for (let r = 0; r < Number(values.rounds); r++) {
    for (const host of hosts) {
      const monitor = loopMonitor()
      monitor.enable()
      await loopTurns()
      const wall = await burnBatch(host.bench, CHILDREN, iterations)
      await loopTurns()
      monitor.disable()
      host.rounds.push({ wall, p99: delayMs(monitor.percentile(99)), max: delayMs(monitor.max) })
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
  for (const { niceIncrement, rounds } of hosts) {
    const column = (key, digits) => rounds.map((round) => round[key].toFixed(digits)).join(' ')
    console.log(
      `${values.isolation}, niceIncrement ${niceIncrement}: wall ms ${column('wall', 0)} (median ${median(rounds.map((x) => x.wall)).toFixed(0)}); ` +
        `event-loop p99 ms ${column('p99', 2)} (median ${median(rounds.map((x) => x.p99)).toFixed(2)}); max ms ${column('max', 1)}`,
    )
  }
} finally {
  await Promise.all(hosts.map(({ bench }) => bench.host.close()))
}
