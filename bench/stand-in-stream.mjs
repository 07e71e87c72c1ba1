#!/usr/bin/env node
/**
 * CPU of one host-model step as a runner's loop reads it, in a loop of its own: a fresh child's
 * RpcClient, the stand-in model (`remoteModel`), one call answered by a fake host in a microtask
 * with S3's chunks (a text delta, usage, finish), read to its end the way the loop reads it
 * (through `untilAbort` unless the build marks the stand-in as stopping at its signal itself).
 * It isolates the runner's side of a host-model call from everything else a delegation does, so
 * two builds can be set side by side where a whole delegation's CPU is too noisy to show it.
 *
 *   npm run build && node bench/stand-in-stream.mjs [DIST]    (DIST: another build's dist/ folder)
 */
import { pathToFileURL } from 'node:url'

const dist = pathToFileURL(process.argv[2] ?? new URL('../dist/', import.meta.url).pathname).href.replace(/\/?$/, '/')
const { RpcClient } = await import(dist + 'protocol/rpc.js')
const { remoteModel } = await import(dist + 'worker/remote.js')
const { ToolTable } = await import(dist + 'worker/tool-table.js')
const { untilAbort } = await import(dist + 'agent/models/until-abort.js')
const models = await import(dist + 'agent/models/model.js')
const readsAsItIs = (model) => models.isStandIn?.(model) === true

const CHUNKS = ['done', { type: 'usage', inputTokens: 0, outputTokens: 1 }, { type: 'finish', reason: 'stop' }]
const table = new ToolTable([])
const signal = new AbortController().signal

async function step() {
  const rpc = new RpcClient('child', {
    epoch: 0,
    push(message) {
      if (message.type === 'rpc/call') queueMicrotask(() => rpc.receive({ type: 'rpc/result', child: 'child', call: message.call, chunks: CHUNKS }))
    },
  })
  const model = remoteModel(rpc, 'bench', table, () => {})
  const stream = model.stream({ model: 'scripted', messages: [], signal })
  let chunks = 0
  for await (const _ of readsAsItIs(model) ? stream : untilAbort(stream, signal)) chunks++
  if (chunks !== CHUNKS.length) throw new Error(`read ${chunks} chunks of ${CHUNKS.length}`)
}

const STEPS = 200_000
for (let i = 0; i < STEPS / 2; i++) await step() // warm-up
const rounds = []
for (let round = 0; round < 5; round++) {
  const start = process.cpuUsage()
  for (let i = 0; i < STEPS / 5; i++) await step()
  const { user, system } = process.cpuUsage(start)
  rounds.push((user + system) / (STEPS / 5))
}
rounds.sort((a, b) => a - b)
console.log(`${dist}: ${rounds[2].toFixed(2)} µs of CPU a step (median of 5 rounds of ${STEPS / 5}; ${rounds[0].toFixed(2)}-${rounds[4].toFixed(2)})`)
