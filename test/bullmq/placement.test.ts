/**
 * CONTRACT.md §10's placement timeout, on a redis-server of the test's own: a start on a queue no
 * live node serves fails after `placementTimeoutMs`, naming the queue, and its job leaves the
 * queue; a start waiting behind a busy node waits on past it; one whose node stops while it
 * waits fails at its next check. The host asks Redis whether a node serves the queue with
 * CLIENT LIST, and nothing else on this Redis does: Redis's command count is the host's checks, so
 * a test waits for the checks themselves, never for a time.
 */
import { spawnSync, type ChildProcess } from 'node:child_process'
import { setTimeout as delay } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { Queue } from 'bullmq'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { createHost, ScriptedModel, textResponse, type Host, type ScriptEntry } from 'subagent-worker'
import { bullmqTransport, startNode, type WorkerNode } from 'subagent-worker/bullmq'
import { PROTOCOL_VERSION } from '../../dist/protocol/messages.js'
import { gate } from '../support/loop-helpers.js'
import { freePort, startRedisServer } from '../support/redis.js'

const CONTRACT_MODULE = fileURLToPath(new URL('../fixtures/contract-module.mjs', import.meta.url))
const HAVE_SERVER = spawnSync('redis-server', ['--version']).status === 0
if (!HAVE_SERVER && process.env.CI) throw new Error('CI is set, so the placement tests must run, but redis-server is not on PATH (apt install redis-server)')

const QUEUE = 'placed'
const PLACEMENT_MS = 300

const servers: ChildProcess[] = []
const nodes: WorkerNode[] = []
const hosts: Host[] = []
const closers: Array<() => void> = []
afterEach(async () => {
  await Promise.all(hosts.splice(0).map((host) => host.close()))
  await Promise.all(nodes.splice(0).map((node) => node.close(0)))
  for (const close of closers.splice(0)) close()
  for (const server of servers.splice(0)) server.kill('SIGKILL')
})

/** A Redis of the test's own. */
async function privateRedis(): Promise<{ url: string; admin: Redis }> {
  const port = await freePort()
  await startRedisServer(port, (server) => servers.push(server))
  const url = `redis://127.0.0.1:${port}`
  const admin = new Redis(url)
  closers.push(() => admin.disconnect())
  return { url, admin }
}

/** How many CLIENT LIST commands the Redis ran (MONITOR does not show them, an admin command). */
async function clientLists(admin: Redis): Promise<number> {
  const stats = await admin.info('commandstats')
  return Number(/cmdstat_client\|list:calls=(\d+)/.exec(stats)?.[1] ?? 0)
}

/** Resolves once the host asked `more` more times whether a node serves the queue: Redis's own count, read until it got there. */
async function placementChecks(admin: Redis, more: number): Promise<void> {
  const target = (await clientLists(admin)) + more
  const until = performance.now() + 30_000
  while ((await clientLists(admin)) < target) {
    if (performance.now() > until) throw new Error(`the host did not ask Redis for the queue's nodes ${more} more times within 30 s`)
    await delay(20) // a poll of Redis's count, not a wait for time to pass
  }
}

function hostOn(url: string, script: ScriptEntry[]) {
  const host = createHost({ transport: bullmqTransport({ connection: url, queue: QUEUE, placementTimeoutMs: PLACEMENT_MS, nodeSilenceMs: 30_000 }), agentModule: CONTRACT_MODULE })
  hosts.push(host)
  const model = new ScriptedModel(script)
  host.models.register('scripted', model)
  return { host, model, parent: host.createAgent({ options: { provider: 'scripted', model: 'm' } }) }
}

async function oneSlotNode(url: string): Promise<WorkerNode> {
  const node = await startNode({ connection: url, queue: QUEUE, agentModules: [CONTRACT_MODULE], pool: { maxThreads: 1, childrenPerWorker: 1 }, log: () => {} })
  nodes.push(node)
  return node
}

/** How many jobs wait in the depth-1 queue behind QUEUE. */
async function waiting(url: string): Promise<number> {
  const connection = new Redis(url)
  const queue = new Queue(`${QUEUE}-v${PROTOCOL_VERSION}-depth1`, { connection })
  try {
    return await queue.getWaitingCount()
  } finally {
    await queue.close()
    connection.disconnect()
  }
}

/** Settles into what `promise` came to, readable at any time: pending until then. */
function settled<T>(promise: Promise<T>): { state: 'pending' | 'fulfilled' | 'rejected' } {
  const seen = { state: 'pending' as 'pending' | 'fulfilled' | 'rejected' }
  promise.then(
    () => (seen.state = 'fulfilled'),
    () => (seen.state = 'rejected'),
  )
  return seen
}

describe.skipIf(!HAVE_SERVER)('bullmq placement timeout (placementTimeoutMs)', { timeout: 60_000 }, () => {
  it('a start on a queue no live node serves fails after placementTimeoutMs, naming the queue; its job leaves the queue and never runs', async () => {
    const { url, admin } = await privateRedis()
    const { host, model, parent } = hostOn(url, [textResponse('later')])
    const began = performance.now()
    const error = await host.spawn.start({ prompt: 'anyone?', parent }).then(
      () => undefined,
      (failure: unknown) => failure,
    )
    expect(performance.now() - began).toBeGreaterThanOrEqual(PLACEMENT_MS - 1)
    expect(error).toMatchObject({ code: 'ERR_SUBAGENT_NO_NODE' })
    expect((error as Error).message).toContain(`no node serves the queue '${QUEUE}'`)
    expect((error as Error).message).toContain(`subagent-worker node --queue ${QUEUE}`)
    // It failed at the first check past the deadline: Redis was asked once.
    expect(await clientLists(admin)).toBe(1)
    // A node that comes later runs only what is started after it: the failed start's job is gone.
    await oneSlotNode(url)
    expect(await host.spawn.run({ prompt: 'now?', parent })).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'later' }] })
    expect(model.requests.map((request) => request.messages.at(-1))).toMatchObject([{ role: 'user', content: [{ type: 'text', text: 'now?' }] }])
    expect(await waiting(url)).toBe(0)
  })

  it('a start behind a busy node is not failed by it: it waits past several checks, then runs', async () => {
    const { url, admin } = await privateRedis()
    await oneSlotNode(url)
    const held = gate()
    const { host, parent } = hostOn(url, [
      async () => {
        await held.promise
        return textResponse('first')
      },
      textResponse('second'),
    ])
    const first = await host.spawn.start({ prompt: 'hold the slot', parent })
    const second = host.spawn.start({ prompt: 'wait', parent })
    const state = settled(second)
    // Two checks past the deadline, each finding the node (busy): the start waits on.
    await placementChecks(admin, 2)
    expect(state.state).toBe('pending')
    held.open()
    expect(await first.result).toMatchObject({ stopReason: 'completed' })
    await first.dispose()
    const run = await second
    expect(await run.result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'second' }] })
    await run.dispose()
  })

  it('a start whose only node stops while it waits fails at its next check, naming the queue', async () => {
    const { url, admin } = await privateRedis()
    const node = await oneSlotNode(url)
    const { host, parent } = hostOn(url, ['hang'])
    const first = await host.spawn.start({ prompt: 'hold the slot', parent })
    const second = host.spawn.start({ prompt: 'wait', parent })
    const state = settled(second)
    await placementChecks(admin, 1)
    expect(state.state).toBe('pending')
    await node.close(0)
    expect(await first.result).toMatchObject({ stopReason: 'aborted' })
    await expect(second).rejects.toMatchObject({ code: 'ERR_SUBAGENT_NO_NODE', message: expect.stringContaining(`no node serves the queue '${QUEUE}'`) })
    await first.dispose()
  })
})
