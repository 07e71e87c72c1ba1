#!/usr/bin/env node
/**
 * Instructions per S3 delegation, by thread, inline against worker: repeatable on a loaded
 * machine, where CPU time is not. Each isolation runs S3's workload (bench/s3-lanes.mjs) under
 * `valgrind --tool=callgrind --separate-threads=yes` twice, with a small and a large count after
 * the same warm-up; the difference between the two runs, divided by the difference in
 * delegations, is what one delegation costs, with start-up, imports, threads starting and the
 * host closing cancelled out. Each thread's total comes from its own callgrind file: the host's
 * main thread (file -01), the runner threads (those that ran `node::worker::Worker::Run`), and
 * the rest (V8's platform threads: concurrent GC and compilation; libuv's).
 *
 * On the main thread, what runs in C++ is split off by callgrind itself, from the inclusive cost
 * of the functions in NATIVE_PARTS (callgrind_annotate --inclusive): garbage collection and the
 * structured clone of frames. callgrind names JIT code only by address, so the rest (our code,
 * ajv's, node's JS, V8's builtins) is split by V8's sampling profiler: given `--shares FILE`
 * (written by `node bench/profile-host.mjs --json FILE`), each JS part's median share of the
 * busy samples outside the garbage collector scales the instructions left here.
 *
 *   npm run build && node bench/profile-instructions.mjs [--counts 200,1000] [--warmup 300]
 *     [--only worker] [--shares FILE] [--out DIR] [--node-flags=--single-threaded]
 *
 * On a loaded machine V8's helper threads (concurrent marking, background compilation) keep a
 * pace of their own, and the main thread then does more or less of that work itself: its count
 * moves with the load (844k against 612k per delegation for the same code, in two sittings).
 * `--node-flags=--single-threaded` keeps all of a thread's GC and compilation on that thread, so
 * two builds compare alike whatever else runs; its figures include that work, and are not the
 * default's.
 *
 * Under valgrind every thread runs in turn on one core, so frames coalesce differently than on
 * two real cores: the figures compare code paths, they are not a rate.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { join } from 'node:path'
import { parseArgs } from 'node:util'

const { values } = parseArgs({
  options: {
    workload: { type: 'string' },
    warmup: { type: 'string', default: '300' },
    total: { type: 'string' },
    counts: { type: 'string', default: '200,1000' },
    only: { type: 'string' },
    shares: { type: 'string' },
    out: { type: 'string', default: '/tmp/profile-instructions' },
    /** V8 flags for node under valgrind, e.g. '--single-threaded': no concurrent GC or compilation, so a thread's count no longer depends on how its helpers were scheduled. */
    'node-flags': { type: 'string', default: '' },
    /** Reads the callgrind files a previous run left in --out instead of running again. */
    reuse: { type: 'boolean', default: false },
  },
})

/** Main-thread C++ split off by callgrind: each part is the inclusive cost of these functions (none calls another's). */
const NATIVE_PARTS = {
  'garbage collector': [/^v8::internal::Heap::CollectGarbage\(/, /^v8::internal::IncrementalMarking::Step\(/],
  'frames: structured clone out': [/^node::worker::Message::Serialize\(/],
  'frames: structured clone in': [/^node::worker::Message::Deserialize\(/],
}

if (values.workload) {
  // Inside valgrind: warm up, then the counted delegations, on one host.
  const { s3Host, s3Round } = await import('./s3-lanes.mjs')
  const bench = s3Host(values.workload)
  try {
    await s3Round(bench, Number(values.warmup))
    await s3Round(bench, Number(values.total))
  } finally {
    await bench.host.close()
  }
} else {
  await main()
}

async function main() {
  const [small, large] = values.counts.split(',').map(Number)
  const isolations = values.only ? [values.only] : ['inline', 'worker']
  const perDelegation = {}
  for (const isolation of isolations) {
    const [a, b] = [small, large].map((total) => threadTotals(isolation, total))
    perDelegation[isolation] = Object.fromEntries(Object.keys(b).map((k) => [k, (b[k] - a[k]) / (large - small)]))
  }
  const fmt = (n) => Math.round(n).toLocaleString('en-US')
  console.log(`instructions per S3 delegation (callgrind, runs of ${small} and ${large} after ${values.warmup} warm-up, 64 in flight)`)
  console.log(`| thread | ${isolations.join(' | ')} |`)
  console.log(`|---|${isolations.map(() => '---').join('|')}|`)
  for (const thread of ['main', 'runners', 'helpers', 'all']) console.log(`| ${thread} | ${isolations.map((i) => fmt(perDelegation[i][thread])).join(' | ')} |`)
  console.log(`\nmain thread by part${values.shares ? ` (JS parts: V8 profile shares from ${values.shares})` : ''}`)
  console.log(`| part | ${isolations.join(' | ')} |`)
  console.log(`|---|${isolations.map(() => '---').join('|')}|`)
  const rows = Object.keys(NATIVE_PARTS).map((part) => [part, (i) => perDelegation[i][part]])
  const rest = (i) => perDelegation[i].main - Object.keys(NATIVE_PARTS).reduce((sum, part) => sum + perDelegation[i][part], 0)
  if (values.shares) {
    const shares = jsShares(isolations)
    const names = [...new Set(isolations.flatMap((i) => Object.keys(shares[i])))]
    for (const name of names) rows.push([name, (i) => (shares[i][name] ?? 0) * rest(i)])
  } else {
    rows.push(['JS, V8 builtins and the rest', rest])
  }
  rows.push(['**main thread**', (i) => perDelegation[i].main])
  for (const [name, value] of rows) console.log(`| ${name} | ${isolations.map((i) => fmt(value(i))).join(' | ')} |`)
}

/** One callgrind run of `total` delegations: instructions by kind of thread. */
function threadTotals(isolation, total) {
  const dir = join(values.out, `${isolation}-${total}`)
  if (!values.reuse) callgrind(dir, isolation, total)
  const totals = { main: 0, runners: 0, helpers: 0, all: 0 }
  for (const name of readdirSync(dir)) {
    const path = join(dir, name)
    const text = readFileSync(path, 'utf8')
    const ir = Number(/^totals: (\d+)/m.exec(text)?.[1] ?? 0)
    const kind = name.endsWith('-01') ? 'main' : text.includes('node::worker::Worker::Run()') ? 'runners' : 'helpers'
    totals[kind] += ir
    totals.all += ir
    if (kind === 'main') Object.assign(totals, nativeParts(path))
  }
  return totals
}

/** Runs the workload under callgrind, one file a thread in `dir`. */
function callgrind(dir, isolation, total) {
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  const script = fileURLToPath(import.meta.url)
  execFileSync('valgrind', ['--tool=callgrind', '--separate-threads=yes', '--dump-line=no', `--callgrind-out-file=${dir}/cg.%p`, process.execPath, ...values['node-flags'].split(' ').filter(Boolean), script,
    '--workload', isolation, '--warmup', values.warmup, '--total', String(total)], { stdio: ['ignore', 'ignore', 'pipe'], maxBuffer: 1 << 26 })
}

/** The main thread's instructions in each of NATIVE_PARTS, from callgrind_annotate's inclusive costs. */
function nativeParts(file) {
  const listing = execFileSync('callgrind_annotate', ['--inclusive=yes', '--threshold=100', file], { encoding: 'utf8', maxBuffer: 1 << 28 })
  const parts = Object.fromEntries(Object.keys(NATIVE_PARTS).map((part) => [part, 0]))
  for (const line of listing.split('\n')) {
    // "  170,305,954 (10.34%)  ???:v8::internal::Heap::CollectGarbage(...) [/usr/bin/node]"
    const match = /^\s*([\d,]+) \([^)]*\)\s+[^:]*:(.*)$/.exec(line)
    if (!match) continue
    for (const [part, patterns] of Object.entries(NATIVE_PARTS)) {
      if (patterns.some((pattern) => pattern.test(match[2]))) parts[part] += Number(match[1].replaceAll(',', ''))
    }
  }
  return parts
}

/** Each part's median share of V8's busy samples outside the garbage collector (bench/profile-host.mjs --json). */
function jsShares(isolations) {
  const { samples } = JSON.parse(readFileSync(values.shares, 'utf8'))
  const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1]
  const share = (isolation) => {
    const rounds = samples[isolation].map((parts) => {
      const { 'garbage collector': _gc, ...js } = parts
      const sum = Object.values(js).reduce((a, b) => a + b, 0)
      return Object.fromEntries(Object.entries(js).map(([k, us]) => [k, us / sum]))
    })
    const names = new Set(rounds.flatMap(Object.keys))
    return Object.fromEntries([...names].map((k) => [k, median(rounds.map((r) => r[k] ?? 0))]))
  }
  return Object.fromEntries(isolations.map((i) => [i, share(i)]))
}
