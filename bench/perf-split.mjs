#!/usr/bin/env node
/**
 * A `perf` profile of `bench/threads.mjs` split by kind of thread and kind of work, in µs of CPU
 * per unit (a delegation, a chunk) of its timed round. CPU time on this machine moves with the
 * load; this says where a round's CPU went, in parts that add up to the /proc figures threads.mjs
 * prints, so that the parts of two transports can be set side by side.
 *
 *   perf record -k CLOCK_MONOTONIC -F 1999 -o bench/out/perf.data -- \
 *     node --perf-basic-prof bench/threads.mjs --workload S3 --threads 3 --window bench/out/window.json
 *   perf script -i bench/out/perf.data -F tid,time,ip,sym,dso | node bench/perf-split.mjs bench/out/window.json 1999
 *
 * Samples outside the timed round (start-up, warm-up, close) are left out. Threads: the main
 * thread, the runner threads (threads.mjs names them: those started after the host), and the rest,
 * V8's and libuv's helpers. Kinds of work, by the sample's symbol and object file: the garbage
 * collector, structured clone (node's message serialization), V8's runtime (its C++ outside the
 * collector: inline-cache misses, map transitions, the compiler on the helpers), V8's builtins
 * (the interpreter's handlers and built-in functions), the library's own JavaScript by folder,
 * node's JavaScript, the C and C++ libraries (libc, libuv, node's own C++) and the kernel.
 * `node --perf-basic-prof` names JIT code; `--perf-basic-prof` leaves isolate-*.log files here,
 * which .gitignore keeps out.
 */
import { readFileSync } from 'node:fs'
import { createInterface } from 'node:readline'

const [windowFile, hzArg] = process.argv.slice(2)
if (!windowFile || !hzArg) throw new Error('usage: perf script -F tid,time,ip,sym,dso | node bench/perf-split.mjs WINDOW.json HZ')
const window = JSON.parse(readFileSync(windowFile, 'utf8'))
const start = Number(window.start)
const end = Number(window.end)
const runners = new Set(window.runners)
const usPerSample = 1e6 / Number(hzArg) / window.units

const GC = /Scaveng|MarkCompact|Marking|Sweeper|Heap::|GCTracer|Evacuat|MemoryAllocator|MemoryChunk|SizeFromMap|OnMoveEvent|Pretenuring|IterateAndScavenge|ScavengeVisitor|FreeList|RecordWrite|WriteBarrier/
const CLONE = /ValueSerializer|ValueDeserializer|node::worker::Message|SerializerDelegate|DeserializerDelegate/

/** A sample's kind of work: by the object file it ran in, then by its symbol. */
function kindOf(symbol, dso) {
  if (dso.includes('kernel')) return 'kernel'
  if (GC.test(symbol)) return 'garbage collector'
  if (CLONE.test(symbol)) return 'structured clone'
  if (dso.includes('perf-') || symbol.startsWith('JS:')) {
    const file = /\/dist\/(\S+?)\.c?js:/.exec(symbol)
    if (file) return file[1] === 'protocol/precompiled' ? 'JS: protocol/precompiled (validators)' : `JS: ${file[1].replace(/\/[^/]+$/, '')}`
    if (symbol.includes('node:')) return "node's JavaScript"
    return 'JS: other'
  }
  if (symbol.startsWith('Builtins_')) return "V8's builtins"
  if (symbol.startsWith('v8::') || symbol.startsWith('cppgc::') || symbol.startsWith('heap::')) return "V8's runtime (C++)"
  return 'libc, libuv, node C++'
}

const threads = { main: new Map(), runners: new Map(), helpers: new Map() }
const SAMPLE = /^\s*(\d+)\s+([\d.]+):\s+[0-9a-f]+\s+(.*?)\s+\(([^()]*)\)\s*$/
for await (const line of createInterface({ input: process.stdin })) {
  const sample = SAMPLE.exec(line)
  if (!sample) continue
  const time = Number(sample[2])
  if (time < start || time >= end) continue
  const tid = Number(sample[1])
  const thread = tid === window.main ? threads.main : runners.has(tid) ? threads.runners : threads.helpers
  const kind = kindOf(sample[3], sample[4])
  thread.set(kind, (thread.get(kind) ?? 0) + 1)
}

const kinds = [...new Set(Object.values(threads).flatMap((thread) => [...thread.keys()]))]
const total = (thread) => [...thread.values()].reduce((sum, n) => sum + n, 0)
const all = (kind) => Object.values(threads).reduce((sum, thread) => sum + (thread.get(kind) ?? 0), 0)
kinds.sort((a, b) => all(b) - all(a))
const cell = (n) => (n * usPerSample).toFixed(1)
console.log(`µs of CPU a ${window.unit}, ${window.units} ${window.unit}s`)
console.log('| kind of work | main | runners | helpers | all |')
console.log('|---|---|---|---|---|')
for (const kind of kinds) console.log(`| ${kind} | ${cell(threads.main.get(kind) ?? 0)} | ${cell(threads.runners.get(kind) ?? 0)} | ${cell(threads.helpers.get(kind) ?? 0)} | ${cell(all(kind))} |`)
const sum = Object.values(threads).reduce((n, thread) => n + total(thread), 0)
console.log(`| **all** | ${cell(total(threads.main))} | ${cell(total(threads.runners))} | ${cell(total(threads.helpers))} | ${cell(sum)} |`)
