#!/usr/bin/env node
/**
 * Where the host thread's CPU goes per S3 delegation (zero model latency, a host ScriptedModel,
 * 64 in flight), inline against worker in one run. The host's main thread is sampled by V8's
 * profiler through node:inspector; runner threads are not sampled, so the worker figure is the
 * host's share alone, and inline's is the whole delegation (inline runs it all on that thread).
 * Self time is grouped by the source file a frame belongs to, so the table survives files moving
 * between folders. The profile gives each part's share of the thread's busy samples; the thread's
 * own CPU time (from /proc, so a loaded machine's waits do not count) scales the shares to µs.
 *
 *   npm run build && node bench/profile-host.mjs [--total 4000] [--rounds 3] [--json FILE]
 *
 * Rounds alternate inline and worker; the table gives each part's median µs per delegation.
 */
import { Session } from 'node:inspector/promises'
import { readFileSync, writeFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { IN_FLIGHT, s3Host, s3Round } from './s3-lanes.mjs'

const { values } = parseArgs({
  options: { total: { type: 'string', default: '4000' }, rounds: { type: 'string', default: '3' }, json: { type: 'string' } },
})
const TOTAL = Number(values.total)
const ROUNDS = Number(values.rounds)
const SAMPLING_US = 200

/** A part of the host's work, named by the files whose frames count toward it. First match wins. */
const PARTS = [
  ['store', /\/(store|ndjson-store|ndjson-lock)\.js$/],
  ['mirror and validation', /\/(feed|watch|validate|validators|schema|values|session)\.js$|\/node_modules\/ajv\//],
  ['lifecycle and limits', /\/(lifecycle|budget|limits|diagnostics|delegating-call|depth)\.js$/],
  ['driver (provider, run, result)', /\/(provider|run|result|inline|host|settings|options|jobs|types)\.js$/],
  ['frames and encoding', /\/(outbox|channel|intake|bounds|messages|stream|content|envelope)\.js$/],
  ['runner bookkeeping', /\/(remote-child|runner-pool|runner-site|pool-transport|worker-thread|child-process|liveness)\.js$/],
  ['rpc and host calls', /\/(rpc|host-calls)\.js$/],
  ['agent loop and model', /\/src\/agent\/|\/dist\/agent\//],
  ['node internals (ports, timers, promises)', /^node:/],
  // Functions made by `new Function` (ajv's compiled validators) and V8's builtins have no URL.
  ['no url (compiled validators, V8 builtins)', /^$/],
]
const SPECIAL = { '(garbage collector)': 'garbage collector', '(program)': 'native (V8 and libuv)' }

function partOf(node) {
  const { url, functionName } = node.callFrame
  if (SPECIAL[functionName]) return SPECIAL[functionName]
  if (functionName === '(idle)') return null
  for (const [name, pattern] of PARTS) if (pattern.test(url)) return name
  return 'the rest'
}

/** Each part's share of the thread's busy samples in one profile. */
function shares(profile) {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const counts = {}
  let busy = 0
  for (const id of profile.samples) {
    const part = partOf(byId.get(id))
    if (part === null) continue
    counts[part] = (counts[part] ?? 0) + 1
    busy++
  }
  return Object.fromEntries(Object.entries(counts).map(([part, n]) => [part, n / busy]))
}

/** The main thread's own CPU time in µs (utime + stime of its task), whatever the other threads do. */
function mainThreadCpuUs() {
  const fields = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8').split(') ')[1].split(' ')
  // Fields 14 and 15 of stat(5), counted from the state field (3) after the command name.
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}

const session = new Session()
session.connect()
await session.post('Profiler.enable')
await session.post('Profiler.setSamplingInterval', { interval: SAMPLING_US })

const benches = [s3Host('inline'), s3Host('worker')]
const samples = { inline: [], worker: [] }
try {
  for (const bench of benches) await s3Round(bench, Math.min(TOTAL, 1000))
  for (let r = 0; r < ROUNDS; r++) {
    for (const bench of benches) {
      await session.post('Profiler.start')
      const cpu0 = mainThreadCpuUs()
      await s3Round(bench, TOTAL)
      const cpuUs = mainThreadCpuUs() - cpu0
      const { profile } = await session.post('Profiler.stop')
      samples[bench.isolation].push(Object.fromEntries(Object.entries(shares(profile)).map(([k, share]) => [k, (share * cpuUs) / TOTAL])))
    }
  }
} finally {
  await Promise.all(benches.map((b) => b.host.close()))
  session.disconnect()
}

const names = [...new Set([...PARTS.map(([n]) => n), ...Object.values(SPECIAL), 'the rest'])]
const row = (isolation, name) => median(samples[isolation].map((parts) => parts[name] ?? 0))
const total = (isolation) => median(samples[isolation].map((parts) => Object.values(parts).reduce((a, b) => a + b, 0)))
const fmt = (us) => us.toFixed(1)
console.log(`host-thread CPU per S3 delegation, µs (median of ${ROUNDS} rounds of ${TOTAL}, ${IN_FLIGHT} in flight, sampled every ${SAMPLING_US} µs)`)
console.log('| part | inline (whole delegation) | worker (host share) |')
console.log('|---|---|---|')
for (const name of names) console.log(`| ${name} | ${fmt(row('inline', name))} | ${fmt(row('worker', name))} |`)
console.log(`| **total** | **${fmt(total('inline'))}** | **${fmt(total('worker'))}** |`)
console.log(`worker host share / inline whole: ${(total('worker') / total('inline')).toFixed(2)}×`)
if (values.json) writeFileSync(values.json, JSON.stringify({ total: TOTAL, rounds: ROUNDS, inFlight: IN_FLIGHT, samples }, null, 2))
