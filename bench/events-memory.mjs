// What a stalled `run.events()` reader holds (CONTRACT.md §12): children each record EVENTS
// events (streamed text chunks) while READERS iterators per child read one event and then stall.
// Heap is read after a forced collection, against the same children with no reader:
//   - while the run is live, per stalled reader per 1,000 events it has not read;
//   - after the run is disposed (the host forgets its copy), what the stalled readers keep alive,
//     per 1,000 events.
// The host's store keeps nothing (the default memory store would keep every transcript), so what
// is left after dispose is what the readers hold. Each figure is read at two event counts, to show
// which grow with the events and which do not.
// Run after `npm run build`: node --expose-gc bench/events-memory.mjs [children] [readers]
import { createHost, ScriptedModel } from '../dist/index.js'
import { discard, heap } from './memory-support.mjs'

if (typeof globalThis.gc !== 'function') throw new Error('run with node --expose-gc')
const CHILDREN = Number(process.argv[2] ?? 20)
const READERS = Number(process.argv[3] ?? 10)

const chunksOf = (events) => [...Array.from({ length: events }, (_, i) => ({ type: 'text-delta', text: `token${i} ` })), { type: 'finish', reason: 'stop' }]

/** CHILDREN settled runs (not disposed), each with `readers` iterators stalled after one event. */
async function children(host, parent, readers) {
  const runs = []
  const stalled = []
  for (let i = 0; i < CHILDREN; i++) {
    const run = await host.spawn.start({ prompt: `task ${i}`, parent })
    for (let r = 0; r < readers; r++) {
      const iterator = run.events()[Symbol.asyncIterator]()
      await iterator.next()
      stalled.push(iterator)
    }
    await run.result
    runs.push(run)
  }
  const recorded = runs.reduce((sum, run) => sum + host.agents.get(run.id).session.events.length, 0)
  return { runs, stalled, recorded }
}

async function measure(events, readers) {
  const host = createHost({ isolation: 'inline', store: discard })
  const chunks = chunksOf(events)
  host.models.register('scripted', new ScriptedModel(Array.from({ length: CHILDREN }, () => chunks)))
  const parent = host.createAgent({ options: { provider: 'scripted' } })
  const before = heap()
  const tree = await children(host, parent, readers)
  const live = heap() - before
  await Promise.all(tree.runs.map((run) => run.dispose()))
  tree.runs.length = 0
  const disposed = heap() - before
  const result = { live, disposed, recorded: tree.recorded, stalled: tree.stalled.length }
  await host.close()
  return result
}

await measure(1000, READERS) // warm-up: code paths compiled
for (const events of [1000, 5000]) {
  const none = await measure(events, 0)
  const some = await measure(events, READERS)
  const thousands = none.recorded / 1000
  const kib = (bytes) => `${(bytes / 1024).toFixed(1)} KiB`
  console.log(`${CHILDREN} children × ${none.recorded / CHILDREN} recorded events; ${READERS} stalled readers per child`)
  console.log(`  live, no readers: ${kib(none.live)} (the host's copy, ${(none.live / thousands).toFixed(0)} B per 1,000 events)`)
  const perReader = (some.live - none.live) / (CHILDREN * READERS)
  console.log(`  live, stalled readers: +${kib(some.live - none.live)}: ${perReader.toFixed(0)} B per reader, ${(perReader / (events / 1000)).toFixed(1)} B per reader per 1,000 buffered events`)
  console.log(`  disposed, no readers: ${kib(none.disposed)} left`)
  console.log(`  disposed, stalled readers: ${kib(some.disposed)} left, ${((some.disposed - none.disposed) / thousands).toFixed(0)} B per 1,000 events (the events stalled readers keep alive, once for all of a child's readers)`)
}
