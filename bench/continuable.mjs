// Continuable children (CONTRACT.md §13) on the worker transport, in one run:
//   - the host's memory per idle continuable child (it holds no runner: what is left is the host's
//     copy of its session and its bookkeeping), heap after a forced collection, against the same
//     host with no children;
//   - the time from a message to the child's first event of its activation (its `turn/start`):
//       rebuilt: the child was idle and its runner died; `send` → first event, on a runner that
//                never hosted it;
//       queued:  the message was sent while an activation ran; from that activation's end to the
//                next one's first event (every activation is built from the transcript: a queued
//                message is rebuilt at once on a warm runner).
//     Medians over ROUNDS, the two side by side in each round.
// Run after `npm run build`: node --expose-gc bench/continuable.mjs [idleChildren] [rounds]
import { writeFile, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { createHost, ScriptedModel, textResponse, toolCallResponse } from '../dist/index.js'
import { discard, heap } from './memory-support.mjs'

if (typeof globalThis.gc !== 'function') throw new Error('run with node --expose-gc')
const IDLE = Number(process.argv[2] ?? 1000)
const ROUNDS = Number(process.argv[3] ?? 9)

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

async function settled(run, activation) {
  for await (const s of run.settlements) if (s.activation === activation) return s
  throw new Error(`no activation ${activation}`)
}

/** Resolves with performance.now() at child `id`'s next event of `type`. */
function nextEvent(host, id, type) {
  return new Promise((resolve) => {
    const off = host.on('subagent/event', (info) => {
      if (info.id !== id || info.event.type !== type) return
      off()
      resolve(performance.now())
    })
  })
}

async function memory() {
  const host = createHost({ isolation: 'worker', store: discard, pool: { minThreads: 1, maxThreads: 1, childrenPerWorker: 10 } })
  host.models.register('scripted', new ScriptedModel(Array.from({ length: IDLE + 10 }, (_, i) => textResponse(`answer ${i}`))))
  const parent = host.createAgent({ options: { provider: 'scripted' } })
  // A warm-up wave, disposed, so the pool, validators and code paths are in the baseline.
  const warm = await Promise.all(Array.from({ length: 10 }, () => host.spawn.startContinuable({ prompt: 'warm', parent })))
  await Promise.all(warm.map((run) => settled(run, 1)))
  await Promise.all(warm.map((run) => run.dispose()))
  const before = heap()
  const runs = []
  for (let i = 0; i < IDLE; i += 10) {
    const wave = await Promise.all(Array.from({ length: Math.min(10, IDLE - i) }, () => host.spawn.startContinuable({ prompt: 'first task', parent })))
    await Promise.all(wave.map((run) => settled(run, 1)))
    runs.push(...wave)
  }
  const after = heap()
  const perChild = (after - before) / IDLE
  await host.close()
  return perChild
}

async function latency() {
  const dir = await mkdtemp(join(tmpdir(), 'sw-bench-continuable-'))
  const module = join(dir, 'exit-module.mjs')
  await writeFile(
    module,
    `import { defineAgentModule, defineTool } from ${JSON.stringify(pathToFileURL(join(process.cwd(), 'dist/index.js')).href)}
export default defineAgentModule({ tools: [defineTool({ name: 'exit', description: 'Ends its runner.', parameters: { type: 'object', properties: {} }, execute: () => process.exit(3) })] })
`,
  )
  const rebuilt = []
  const queued = []
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const host = createHost({ isolation: 'worker', store: discard, agentModule: module, pool: { minThreads: 1, maxThreads: 1, childrenPerWorker: 4 } })
      const model = new ScriptedModel([
        textResponse('idle child, first'), // A1
        toolCallResponse('k', 'exit', {}), // the one-shot that ends the runner
        textResponse('warm-up'), // a one-shot on the new runner, so it is started and ready
        textResponse('idle child, second'), // A2: rebuilt on the new runner
        { delayMs: 30, chunks: textResponse('busy child, first') }, // B1: a message is queued behind it
        textResponse('busy child, second'), // B2
      ])
      host.models.register('scripted', model)
      const parent = host.createAgent({ options: { provider: 'scripted' } })

      const a = await host.spawn.startContinuable({ prompt: 'first', parent })
      await settled(a, 1)
      await host.spawn.run({ prompt: 'end your runner', parent })
      await host.spawn.run({ prompt: 'warm up', parent })
      const aStarts = nextEvent(host, a.id, 'turn/start')
      const sent = performance.now()
      a.send('second')
      rebuilt.push((await aStarts) - sent)
      await settled(a, 2)

      const bFirst = new Promise((resolve) => {
        const off = host.on('subagent/event', (info) => {
          if (info.event.type === 'turn/start') {
            off()
            resolve(info.id)
          }
        })
      })
      const b = await host.spawn.startContinuable({ prompt: 'first', parent })
      await bFirst
      const bEnds = nextEvent(host, b.id, 'turn/end')
      b.send('second') // while its first activation runs
      const ended = await bEnds
      const bStarts = await nextEvent(host, b.id, 'turn/start')
      queued.push(bStarts - ended)
      await settled(b, 2)
      await host.close()
    }
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
  return { rebuilt: median(rebuilt), queued: median(queued) }
}

const perChild = await memory()
const { rebuilt, queued } = await latency()
console.log(`idle continuable children: ${IDLE}; host memory per idle child: ${(perChild / 1024).toFixed(1)} KB (goal <= 50 KB)`)
console.log(`message to first event, medians of ${ROUNDS} rounds (worker transport):`)
console.log(`  rebuilt on a fresh runner (idle, its runner died): ${rebuilt.toFixed(2)} ms`)
console.log(`  queued behind a running activation:               ${queued.toFixed(2)} ms`)
console.log(`  ratio rebuilt / queued: ${(rebuilt / queued).toFixed(2)}`)
