#!/usr/bin/env node
/**
 * What a streamed chunk's crossing costs, wire form against wire form: frames of `--per-frame`
 * chunks, each of another child (as S9's fan-in sends them), posted from this thread to a worker
 * thread that checks them as the library does. Today's form is one message a chunk (a host
 * model's `rpc/chunks`, checked by the runner's isHostFrame; a runner's `events`, checked by the
 * host's isRunnerFrame); the flat form is one message a frame, the chunks' child, call and text
 * side by side in one list (the v14 `texts` takes child and text), checked by a loop of typeof tests. CPU is each thread's own (from
 * /proc/thread-self), so another process's load does not count; rounds take turns.
 *
 *   npm run build && node bench/chunk-crossing.mjs [--per-frame 148] [--frames 3000] [--rounds 3]
 */
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads'
import { isHostFrame, isRunnerFrame } from '../dist/protocol/validators.js'

/** This thread's CPU time in µs: utime + stime, in clock ticks (USER_HZ is 100 on Linux, 10 ms a tick). */
function threadCpuUs() {
  const fields = readFileSync('/proc/thread-self/stat', 'utf8').split(') ')[1].split(' ')
  return (Number(fields[11]) + Number(fields[12])) * 10_000
}

const childId = (i) => `0b9b0f0f-6a47-4ed0-bec7-${String(i).padStart(12, '0')}`

/** Each form: how a frame of `n` chunks is made (sender) and checked (receiver). */
const FORMS = {
  'rpc/chunks (host model, today)': {
    make: (n) => Array.from({ length: n }, (_, i) => ({ type: 'rpc/chunks', child: childId(i), call: 3, chunks: [`token${i} `] })),
    check: (frame) => isHostFrame(frame),
  },
  'events (runner, today)': {
    make: (n) => Array.from({ length: n }, (_, i) => ({ type: 'events', child: childId(i), events: [`token${i} `] })),
    check: (frame) => isRunnerFrame(frame),
  },
  'one flat list a frame': {
    make: (n) => {
      const items = []
      for (let i = 0; i < n; i++) items.push(childId(i), 3, `token${i} `)
      return [{ type: 'texts', items }]
    },
    check: ([{ items }]) => {
      for (let i = 0; i < items.length; i += 3) if (typeof items[i] !== 'string' || typeof items[i + 1] !== 'number' || typeof items[i + 2] !== 'string') return false
      return true
    },
  },
}

if (!isMainThread) {
  const { check } = FORMS[workerData]
  let before
  parentPort.on('message', (frame) => {
    if (frame === 'start') return void (before = threadCpuUs())
    if (frame === 'end') return parentPort.postMessage(threadCpuUs() - before)
    if (!check(frame)) throw new Error(`a ${workerData} frame failed its check`)
  })
} else {
  const { values } = parseArgs({ options: { 'per-frame': { type: 'string', default: '148' }, frames: { type: 'string', default: '3000' }, rounds: { type: 'string', default: '3' } } })
  const perFrame = Number(values['per-frame'])
  const frames = Number(values.frames)
  const rounds = Number(values.rounds)
  const samples = Object.fromEntries(Object.keys(FORMS).map((form) => [form, { sender: [], receiver: [] }]))
  for (let round = 0; round < rounds; round++) {
    for (const [form, { make }] of Object.entries(FORMS)) {
      const worker = new Worker(new URL(import.meta.url), { workerData: form })
      // Warm both ends before timing.
      for (let f = 0; f < 200; f++) worker.postMessage(make(perFrame))
      worker.postMessage('start')
      const before = threadCpuUs()
      for (let f = 0; f < frames; f++) worker.postMessage(make(perFrame))
      const sender = threadCpuUs() - before
      worker.postMessage('end')
      const receiver = await new Promise((resolve, reject) => {
        worker.once('message', resolve)
        worker.once('error', reject)
      })
      await worker.terminate()
      samples[form].sender.push(sender / (frames * perFrame))
      samples[form].receiver.push(receiver / (frames * perFrame))
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
  console.log(`${frames} frames of ${perFrame} chunks, ${rounds} rounds taking turns; medians, µs of CPU a chunk`)
  console.log('form'.padEnd(34), 'sender', 'receiver', 'both')
  for (const [form, { sender, receiver }] of Object.entries(samples)) {
    const [s, r] = [median(sender), median(receiver)]
    console.log(form.padEnd(34), s.toFixed(2).padStart(6), r.toFixed(2).padStart(8), (s + r).toFixed(2).padStart(5))
  }
}
