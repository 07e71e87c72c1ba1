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
import { createHost, ScriptedModel, textResponse, type Host, type ScriptEntry, type SubagentRun } from 'subagent-worker'
import { bullmqTransport } from 'subagent-worker/bullmq'
import { eventOf } from '../support/driver-helpers.js'
import { BULLMQ } from '../support/harness.js'
import { startTestNode, type TestNode } from '../support/nodes.js'
import { Watch } from '../support/watch.js'

const FAULT_MODULE = fileURLToPath(new URL('../fixtures/fault-module.mjs', import.meta.url))
const REDIS = BULLMQ?.redis ?? ''
/**
 * Short, so that a held loop outlasts it by far; long enough that a live node starved on a loaded
 * machine still answers within it (2 s was not, at a load of 28 on two cores).
 */
const NODE_SILENCE_MS = 5000
/** Longer than NODE_SILENCE_MS plus a heartbeat: a judge counting it against the node would give it up. */
const HOLD_MS = 7000
/** The node's own limit on its host's silence: past the hold, so the node does not let the held host go. */
const HOST_SILENCE_MS = 30_000

/** Blocks this (the host's) event loop, as a synchronous task on the host would; asleep, so the hold spends no core. */
function holdLoop(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
}

/** What the test has seen pass between the host and `node`, in the order Redis delivered it. */
interface Wire {
  /** The number of the last ping the host sent the node (0 before the first). */
  lastPing: number
  /** Whether the node has said anything since that ping: any frame answers a ping, as the host reads it. */
  answered: boolean
}

/**
 * Listens on Redis, as any client may, to both directions between the host and `node` on one
 * connection, so pings and the node's frames are seen in the order Redis published them. State,
 * not a stream of events: a wait looks at what was already seen as well as what comes, so no ping
 * that went out before the wait began is missed (the host sends the next ping only once the last
 * is answered, so a missed one would be the last one).
 */
async function wireTo(queue: string, node: string) {
  const client = new Redis(REDIS)
  const wire: Wire = { lastPing: 0, answered: false }
  const watch = new Watch()
  client.on('messageBuffer', (_channel: Buffer, bytes: Buffer) => {
    const [, frame] = deserialize(bytes) as [string, Array<{ type?: unknown; n?: unknown }>]
    for (const message of frame) {
      if (message.type === 'ping' && typeof message.n === 'number') Object.assign(wire, { lastPing: message.n, answered: false })
    }
    watch.changed()
  })
  client.on('pmessageBuffer', (_pattern: Buffer, _channel: Buffer, bytes: Buffer) => {
    const [from] = deserialize(bytes) as [string]
    if (from === node) wire.answered = true
    watch.changed()
  })
  await client.subscribe(`${queue}:node:${node}`)
  await client.psubscribe(`${queue}:host:*`)
  return {
    /**
     * Resolves once `holds` is true of what was seen, now or after a later message, and still is
     * when the caller goes on: a message read with the one that made it true may make it false.
     */
    async until(what: string, holds: (seen: Wire) => boolean): Promise<void> {
      do await watch.until(what, () => holds(wire))
      while (!holds(wire))
    },
    get lastPing() {
      return wire.lastPing
    },
    close: () => client.disconnect(),
  }
}

/** `promise`, or a failure naming `what` if the child ends first (its node given up, say): no wait outlives the child. */
function beforeEnd<T>(run: SubagentRun, what: string, promise: Promise<T>): Promise<T> {
  const ended = run.result.then((result) => Promise.reject(new Error(`the child ended (${result.stopReason}: ${result.diagnostic ?? 'no diagnostic'}) while the test waited for ${what}`)))
  return Promise.race([promise, ended])
}

describe.skipIf(!BULLMQ)('a node judged silent, or not', { timeout: 120_000 }, () => {
  let node: TestNode | undefined
  let host: Host | undefined

  async function setUp(script: ScriptEntry[]) {
    const queue = `t-${randomBytes(4).toString('hex')}`
    node = await startTestNode({ redis: REDIS, queue, modules: [FAULT_MODULE], maxThreads: 1, childrenPerWorker: 2, extra: ['--host-silence-ms', String(HOST_SILENCE_MS)] })
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
    await beforeEnd(run, "the child's model call", modelAsked)
    const wire = await wireTo(queue, n.id)
    onTestFinished(() => wire.close())
    // Each round, the node's answer to a ping comes in while the host's loop is held: the node is
    // paused (after answering the last ping, so the host is free to send the next) until a ping is
    // out that it has not answered, let go, and the host holds at once. The heartbeat after the
    // hold fires before the poll phase that reads the answer.
    for (let round = 0; round < 2; round++) {
      await beforeEnd(run, `the node's answer before round ${round}`, wire.until(`answer from the node before round ${round}`, (seen) => seen.answered))
      n.process.kill('SIGSTOP')
      // The ping out when the node stopped counts if it was not answered by then: the host sends no other until it is.
      await beforeEnd(run, `a ping to the stopped node in round ${round}`, wire.until(`unanswered ping to the stopped node in round ${round}`, (seen) => seen.lastPing > 0 && !seen.answered))
      n.process.kill('SIGCONT')
      holdLoop(HOLD_MS)
    }
    // A later ping: the host read the answer after the last hold and kept the node.
    const held = wire.lastPing
    await beforeEnd(run, 'a ping after the last hold', wire.until('ping after the last hold', (seen) => seen.lastPing > held))
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
