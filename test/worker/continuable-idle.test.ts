/**
 * An idle continuable child holds no runner slot (CONTRACT.md §13): a thousand of them live on a
 * host whose pool has one thread with room for ten children, and a one-shot child still starts
 * at once; each of them then takes more work, rebuilt from its transcript.
 */
import { afterEach, expect, it } from 'vitest'
import { textResponse, type ContinuableRun, type Settlement } from 'subagent-worker'
import { CONTRACT_MODULE } from '../support/harness.js'
import { closeWorkerHosts, workerHost } from '../support/worker-host.js'

afterEach(closeWorkerHosts)

const CHILDREN = 1000

async function nextSettlement(run: ContinuableRun, activation: number): Promise<Settlement> {
  for await (const settlement of run.settlements) if (settlement.activation === activation) return settlement
  throw new Error(`child ${run.id} ended before activation ${activation}`)
}

it('1,000 idle continuable children hold no thread slots', { timeout: 240_000 }, async () => {
  const script = Array.from({ length: 2 * CHILDREN + 1 }, (_, i) => textResponse(`answer ${i}`))
  const { host, parent, model } = workerHost(CONTRACT_MODULE, script, { pool: { minThreads: 1, maxThreads: 1, childrenPerWorker: 10, maxQueue: 1 } })
  const runs: ContinuableRun[] = []
  // Started ten at a time (the pool's room; a queue of one refuses more waiting starts): each
  // leaves its runner once its first activation has settled.
  for (let i = 0; i < CHILDREN; i += 10) {
    const wave = await Promise.all(Array.from({ length: 10 }, () => host.spawn.startContinuable({ prompt: 'first', parent })))
    await Promise.all(wave.map((run) => nextSettlement(run, 1)))
    runs.push(...wave)
  }
  expect(host.agents.list()).toHaveLength(CHILDREN + 1)
  // Every slot is free: a one-shot child runs now, with all 1,000 alive.
  const oneShot = await host.spawn.run({ prompt: 'one-shot', parent })
  expect(oneShot.stopReason).toBe('completed')
  expect(model.requests).toHaveLength(CHILDREN + 1)

  // Each takes more work, rebuilt on the one thread ten at a time.
  for (let i = 0; i < CHILDREN; i += 10) {
    const wave = runs.slice(i, i + 10)
    for (const run of wave) run.send('second')
    const settled = await Promise.all(wave.map((run) => nextSettlement(run, 2)))
    expect(settled.map((s) => s.stopReason)).toEqual(Array(10).fill('completed'))
  }
  expect(model.requests).toHaveLength(2 * CHILDREN + 1)
  await Promise.all(runs.map((run) => run.dispose()))
  expect(host.agents.list()).toEqual([parent])
})
