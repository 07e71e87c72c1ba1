/**
 * Whose silence it is (src/parent/runners/liveness.ts), on the real Redis with a node process of the
 * test's own: a host whose own event loop is held longer than `nodeSilenceMs` does not blame its
 * live node for it, and a node that really stopped is still given up on, even when the host's loop
 * was held meanwhile.
 *
 * Skipped without a Redis (see test/support/redis.ts); with CI set, a missing Redis fails the run.
 */
import { randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { deserialize } from 'node:v8'
import { Redis } from 'ioredis'
import { describe, it } from 'vitest'
import { createHost, ScriptedModel, textResponse, type Host, type ScriptEntry, type SessionEvent, type SubagentRun } from 'subagent-worker'
import { bullmqTransport } from 'subagent-worker/bullmq'
import { BULLMQ } from '../support/harness.js'
import { startTestNode, type TestNode } from '../support/nodes.js'

const FAULT_MODULE = fileURLToPath(new URL('../fixtures/fault-module.mjs', import.meta.url))
const REDIS = BULLMQ?.redis ?? ''
/** Short, so that a held loop outlasts it by far; a node's default host silence (5 s) outlasts one hold. */
const NODE_SILENCE_MS = 2000
/** Longer than NODE_SILENCE_MS plus a heartbeat: a judge counting it against the node would give it up. */
const HOLD_MS = 3000

/** Blocks this (the host's) event loop, as a synchronous task on the host would. */
function holdLoop(ms: number): void {
  const end = performance.now() + ms
  while (performance.now() < end);
}

/**
 * Listens where the host talks to `node` on Redis, as any client may: `next()` resolves when the
 * host's next ping to it is out. A hold begun then comes before the poll phase that reads its pong.
 */
async function pingsTo(queue: string, node: string) {
  const client = new Redis(REDIS)
  let seen: () => void = () => {}
  client.on('messageBuffer', (_channel: Buffer, bytes: Buffer) => {
    const [, frame] = deserialize(bytes) as [string, Array<{ type?: unknown }>]
    if (frame.some((message) => message.type === 'ping')) seen()
  })
  await client.subscribe(`${queue}:node:${node}`)
  return {
    next: () => new Promise<void>((resolve) => (seen = resolve)),
    close: () => client.disconnect(),
  }
}

/** The first event of `type` the host records for `run`. */
async function eventOf(run: SubagentRun, type: string): Promise<SessionEvent> {
  for await (const event of run.events()) if (event.type === type) return event
  throw new Error(`the child ended without a ${type} event`)
}

describe.skipIf(!BULLMQ)('a node judged silent, or not', { timeout: 120_000 }, () => {
  let node: TestNode | undefined
  let host: Host | undefined

  async function setUp(script: ScriptEntry[]) {
    const queue = `t-${randomBytes(4).toString('hex')}`
    node = await startTestNode({ redis: REDIS, queue, modules: [FAULT_MODULE], maxThreads: 1, childrenPerWorker: 2 })
    host = createHost({ transport: bullmqTransport({ connection: REDIS, queue, nodeSilenceMs: NODE_SILENCE_MS }), agentModule: FAULT_MODULE })
    host.models.register('scripted', new ScriptedModel(script))
    const parent = host.createAgent({ options: { provider: 'scripted', model: 'm' } })
    return { node, host, parent, queue }
  }

  async function tearDown() {
    node?.process.kill('SIGCONT')
    await host?.close()
    await node?.stop()
    node = host = undefined
  }

  it('a host whose own loop is held past nodeSilenceMs, twice, does not give up its live node', async ({ expect, onTestFinished }) => {
    onTestFinished(tearDown)
    let asked!: () => void
    const modelAsked = new Promise<void>((resolve) => (asked = resolve))
    let release!: () => void
    const released = new Promise<void>((resolve) => (release = resolve))
    // The child's model call waits on the host while the host's loop is held.
    const { node: n, host: h, parent, queue } = await setUp([
      async () => {
        asked()
        await released
        return textResponse('still here')
      },
    ])
    const run = await h.spawn.start({ prompt: 'wait for the host', parent })
    await modelAsked
    const pings = await pingsTo(queue, n.id)
    onTestFinished(() => pings.close())
    // Each round, the node's pong to a ping comes in while the host's loop is held: the node is
    // paused until the ping is out (so it cannot answer first), let go, and the host holds at once.
    // The heartbeat after the hold fires before the poll phase that reads the pong.
    for (let round = 0; round < 2; round++) {
      n.process.kill('SIGSTOP')
      await pings.next()
      n.process.kill('SIGCONT')
      holdLoop(HOLD_MS)
    }
    await pings.next()
    release()
    const result = await run.result
    expect(result.diagnostic).toBeUndefined()
    expect(result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'still here' }] })
    await run.dispose()
  })

  it('a node stopped (SIGSTOP) while the host\'s loop was held is still given up on, naming the node', async ({ expect, onTestFinished }) => {
    onTestFinished(tearDown)
    const { node: n, host: h, parent } = await setUp(['hang'])
    const run = await h.spawn.start({ prompt: 'stream then wait', parent })
    await eventOf(run, 'assistant/chunk')
    const stoppedAt = performance.now()
    n.process.kill('SIGSTOP')
    holdLoop(HOLD_MS)
    const result = await run.result
    const settledMs = performance.now() - stoppedAt
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toMatch(new RegExp(`^node ${n.id} stopped answering for \\d+ ms \\(it was killed or cut off from Redis\\), so its children were given up$`))
    // The silence the verdict names is the host's listening time, not the hold; it is rounded, so it may equal the limit.
    expect(Number(/for (\d+) ms/.exec(result.diagnostic ?? '')![1])).toBeGreaterThanOrEqual(NODE_SILENCE_MS)
    await run.dispose()
    // Reported, not asserted: the bound is nodeSilenceMs + one beat, plus the time the host's loop was held.
    console.log(`a SIGSTOPped node's child settled ${Math.round(settledMs)} ms after the stop (nodeSilenceMs ${NODE_SILENCE_MS}, host held ${HOLD_MS} ms)`)
  })
})
