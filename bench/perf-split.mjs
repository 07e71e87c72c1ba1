#!/usr/bin/env node
/**
 * A `perf` profile of `bench/threads.mjs` split by kind of thread and kind of work, in µs of CPU
 * per unit (a delegation, a chunk) of its timed round. CPU time on this machine moves with the
 * load; this says where a round's CPU went, in parts that add up to the /proc figures threads.mjs
 * prints, so that the parts of two transports can be set side by side. Run it in bench/out
 * (ignored by git): `perf inject --jit` writes a file for every function V8 compiled.
 *
 *   cd bench/out
 *   perf record -g -k CLOCK_MONOTONIC -F 999 -o perf.data -- \
 *     node --perf-prof ../threads.mjs --workload S3 --threads 3 --total 16000 --window window.json
 *   perf inject --jit -i perf.data -o perf.jit.data
 *   perf script -i perf.jit.data -F tid,time,ip,sym,dso | node ../perf-split.mjs window.json 999
 *
 * `--perf-prof` records where V8 puts each function's code and when it moves or reuses it, which
 * `perf inject --jit` applies sample by sample; `--perf-basic-prof`'s map has no time, so code
 * that moved (the collector moves code, and reuses the space) is named after whatever was there
 * first. Samples outside the timed round (start-up, warm-up, close) are left out.
 *
 * Threads: the main thread, the runner threads (threads.mjs names them: those started after the
 * host), and the rest, V8's and libuv's helpers. The first table sorts each sample by the
 * function it was in: the garbage collector, structured clone (node's message serialization),
 * V8's runtime (its C++ outside the collector: inline-cache misses, map transitions, the compiler
 * on the helpers), V8's builtins (the interpreter's handlers, promises, built-in functions), the
 * library's own JavaScript, node's and dependencies' JavaScript, the C and C++ libraries (libc, libuv, node's own
 * C++) and the kernel. With call chains (`perf record -g`) a second table gives each sample of the
 * main and runner threads to the nearest of the library's functions on its stack, by folder and
 * file, so a folder counts the V8 and kernel work its code called too; samples with none of the
 * library's functions on the stack (the event loop's own work: a message's arrival and decoding, a
 * collection run as a task, microtasks) have a row of their own.
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
/** The library's file a JIT frame belongs to: its path under dist/, without the extension (a dependency's dist/ is not the library's). */
const LIBRARY = /\/dist\/(\S+?)\.c?js:/
const libraryFile = (symbol) => (symbol.includes('/node_modules/') ? undefined : LIBRARY.exec(symbol)?.[1])

const isJit = (symbol, dso) => dso.includes('jitted-') || dso.includes('perf-') || symbol.startsWith('JS:')

/** A frame's kind of work: by the object file it ran in, then by its symbol. */
function kindOf({ symbol, dso }) {
  if (dso.includes('kernel')) return 'kernel'
  if (GC.test(symbol)) return 'garbage collector'
  if (CLONE.test(symbol)) return 'structured clone'
  if (isJit(symbol, dso)) {
    const file = libraryFile(symbol)
    if (file) return file === 'protocol/precompiled' ? "the library's JS: compiled validators" : "the library's JS"
    return "node's and dependencies' JavaScript"
  }
  if (symbol.startsWith('Builtins_')) return "V8's builtins"
  if (symbol.startsWith('v8::') || symbol.startsWith('cppgc::') || symbol.startsWith('heap::')) return "V8's runtime (C++)"
  return 'libc, libuv, node C++'
}

/** The library's folder and file nearest the sample on its stack (leaf first). */
function ownerOf(frames) {
  for (const { symbol, dso } of frames) {
    const file = isJit(symbol, dso) ? libraryFile(symbol) : undefined
    if (file) return file
  }
  return '(no function of the library on the stack)'
}

const count = (map, key) => map.set(key, (map.get(key) ?? 0) + 1)
const byKind = { main: new Map(), runners: new Map(), helpers: new Map() }
const byOwner = { main: new Map(), runners: new Map() }
let chains = false

function take(tid, time, frames) {
  if (frames.length === 0 || time < start || time >= end) return
  const thread = tid === window.main ? 'main' : runners.has(tid) ? 'runners' : 'helpers'
  count(byKind[thread], kindOf(frames[0]))
  if (frames.length > 1) chains = true
  if (thread !== 'helpers') count(byOwner[thread], ownerOf(frames))
}

// `tid time: ip symbol (dso)` on one line without call chains; with them, `tid time:` and a frame a line.
const HEADER = /^\s*(\d+)\s+([\d.]+):\s*(?:[0-9a-f]+\s+(.*?)\s+\(([^()]*)\))?\s*$/
const FRAME = /^\s+[0-9a-f]+\s+(.*?)\s+\(([^()]*)\)\s*$/
let sample
for await (const line of createInterface({ input: process.stdin })) {
  const header = HEADER.exec(line)
  if (header) {
    if (sample) take(...sample)
    sample = [Number(header[1]), Number(header[2]), header[3] === undefined ? [] : [{ symbol: header[3], dso: header[4] }]]
    continue
  }
  const frame = sample && FRAME.exec(line)
  if (frame) sample[2].push({ symbol: frame[1], dso: frame[2] })
}
if (sample) take(...sample)

const cell = (n) => (n * usPerSample).toFixed(1)
const sum = (map) => [...map.values()].reduce((total, n) => total + n, 0)

function table(title, threads) {
  const names = Object.keys(threads)
  const all = (row) => names.reduce((total, name) => total + (threads[name].get(row) ?? 0), 0)
  const rows = [...new Set(names.flatMap((name) => [...threads[name].keys()]))].sort((a, b) => all(b) - all(a))
  console.log(`\n| ${title} | ${names.join(' | ')} | all |`)
  console.log(`|---|${names.map(() => '---|').join('')}---|`)
  for (const row of rows) console.log(`| ${row} | ${names.map((name) => cell(threads[name].get(row) ?? 0)).join(' | ')} | ${cell(all(row))} |`)
  const total = names.reduce((n, name) => n + sum(threads[name]), 0)
  console.log(`| **all** | ${names.map((name) => cell(sum(threads[name]))).join(' | ')} | ${cell(total)} |`)
}

console.log(`µs of CPU a ${window.unit}, over ${window.units} ${window.unit}s`)
table('kind of work (the function a sample was in)', byKind)
if (chains) table("the library's nearest function on the stack, by file", byOwner)
