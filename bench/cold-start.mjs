#!/usr/bin/env node
/**
 * What a runner's start costs in CPU: rounds of a fresh Node process each, which imports the
 * package, then times `createHost()` (one runner, the contract suite's agent module), one
 * delegation and `close()`, and reads the CPU that took: its own process's, every thread counted
 * (`process.cpuUsage`), and, on the process transport, its runner processes' once they are reaped
 * (`/proc/self/stat`'s cutime and cstime, in clock ticks of 10 ms). The package's own import is not
 * counted: a host pays it once, a runner at each start. Medians over the rounds.
 *
 *   npm run build && node bench/cold-start.mjs [--rounds 15] [--transports worker,process]
 *
 * To compare two builds, run it from each tree in turn: every figure is read off this machine
 * while it runs, so only figures taken side by side compare.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '15' }, transports: { type: 'string', default: 'worker,process' }, round: { type: 'string' } } })
const MODULE = fileURLToPath(new URL('../test/fixtures/contract-module.mjs', import.meta.url))

/** This process's reaped children's CPU, in ms (clock ticks of 10 ms). */
function reaped() {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ')
  return (Number(fields[13]) + Number(fields[14])) * 10
}

/** One round, in this process: prints `wall host children` in ms. */
async function round(isolation) {
  const { createHost, ScriptedModel, textResponse } = await import('../dist/index.js')
  const cpu0 = process.cpuUsage()
  const children0 = reaped()
  const t0 = performance.now()
  const host = createHost({ isolation, agentModule: MODULE, pool: { minThreads: 1, maxThreads: 1 } })
  host.models.register('scripted', new ScriptedModel([textResponse('done')]))
  const parent = host.createAgent({ options: { provider: 'scripted' } })
  const run = await host.spawn.start({ prompt: 'go', parent, signal: new AbortController().signal })
  if ((await run.result).stopReason !== 'completed') throw new Error('the child did not complete')
  await run.dispose()
  await host.close()
  const cpu = process.cpuUsage(cpu0)
  console.log(performance.now() - t0, (cpu.user + cpu.system) / 1000, reaped() - children0)
}

const median = (list) => list.toSorted((a, b) => a - b)[Math.floor((list.length - 1) / 2)]

if (values.round) await round(values.round)
else {
  const self = fileURLToPath(import.meta.url)
  for (const transport of values.transports.split(',')) {
    const rounds = Array.from({ length: Number(values.rounds) }, () => execFileSync(process.execPath, [self, '--round', transport], { encoding: 'utf8' }).trim().split(' ').map(Number))
    const [wall, host, children] = [0, 1, 2].map((i) => median(rounds.map((figures) => figures[i])))
    console.log(`${transport.padEnd(8)} create, one delegation, close: wall ${wall.toFixed(0)} ms, CPU ${(host + children).toFixed(0)} ms (the host process ${host.toFixed(0)}, its runner processes ${children.toFixed(0)}); medians of ${rounds.length}`)
  }
}
