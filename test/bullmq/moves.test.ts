/**
 * Thread-mates survive on the BullMQ transport (CONTRACT.md §8, §10), against the real Redis:
 *
 * - within a node: the thread-mates suite (test/support/moves.ts) on a node of each test's own,
 *   whose pool rebuilds a moved child on another of its threads when the host says so;
 * - across nodes: a node SIGKILLed while its children wait on their host model; the host
 *   places them again and they complete on the other node, with their module tool run once.
 *
 * Skipped without a Redis (see test/support/redis.ts); with CI set, a missing Redis fails the run.
 */
import { randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { createHost, createMemoryStore, ScriptedModel, textOf, textResponse, toolCallResponse, type Host, type Model, type ModelRequest, type StreamChunk } from 'subagent-worker'
import { bullmqTransport, startNode, type WorkerNode } from 'subagent-worker/bullmq'
import { eventOf } from '../support/driver-helpers.js'
import { BULLMQ } from '../support/harness.js'
import { contiguous, describeMoves, moved, type MakeHost } from '../support/moves.js'
import { startTestNode, type TestNode } from '../support/nodes.js'

const FAULT_MODULE = fileURLToPath(new URL('../fixtures/fault-module.mjs', import.meta.url))
const REDIS = BULLMQ?.redis ?? ''
const freshQueue = () => `m-${randomBytes(4).toString('hex')}`

const hosts: Host[] = []
const nodes: WorkerNode[] = []
const processes: TestNode[] = []
afterEach(async () => {
  await Promise.all(hosts.splice(0).map((host) => host.close()))
  await Promise.all(nodes.splice(0).map((node) => node.close(0)))
  await Promise.all(processes.splice(0).map((node) => node.stop()))
})

/**
 * A host on a queue of its own. Patient with its nodes: a loaded machine can hold a live node's
 * heartbeat past the default nodeSilenceMs, and these tests are about threads, not nodes.
 */
function bullmqHost(queue: string, script: Parameters<MakeHost>[0], nodeSilenceMs = 30_000) {
  const host = createHost({ transport: bullmqTransport({ connection: REDIS, queue, nodeSilenceMs }), agentModule: FAULT_MODULE, store: createMemoryStore(), abortGraceMs: 200 })
  hosts.push(host)
  host.models.register('scripted', new ScriptedModel(script))
  return { host, parent: host.createAgent({ options: { provider: 'scripted' } }) }
}

/** One node (in this process, with the pool the test asks for) serving a fresh queue, and a host on it. */
const onOneNode: MakeHost = async (script, options = {}) => {
  const queue = freshQueue()
  nodes.push(await startNode({ connection: REDIS, queue, agentModules: [FAULT_MODULE], pool: options.pool ?? {}, log: () => {} }))
  return bullmqHost(queue, script)
}

describe.skipIf(!BULLMQ)('bullmq transport', () => {
  describeMoves('within a node', onOneNode, 'terminated')

  /** Calls the module tool `where`, then holds its answer's request (streamed 'answer ') until aborted (a move) or released; once moved, answers whole. */
  class HeldAnswer implements Model {
    readonly requests: ModelRequest[] = []
    constructor(
      readonly i: number,
      readonly held: () => void,
      readonly release: Promise<void>,
    ) {}

    async *stream(request: ModelRequest): AsyncGenerator<StreamChunk> {
      this.requests.push({ ...request, messages: [...request.messages] })
      if (this.requests.length === 1) return yield* toolCallResponse('w', 'where', {})
      if (this.requests.length > 2) return yield* textResponse(`answer ${this.i}`)
      yield { type: 'text-delta', text: 'answer ' }
      this.held()
      const { signal } = request
      await new Promise<void>((resolve, reject) => {
        void this.release.then(resolve)
        signal.addEventListener('abort', () => reject(signal.reason), { once: true })
      })
      yield* textResponse(String(this.i))
    }
  }

  /** `count` children, each on a HeldAnswer model of its own; resolves once every one holds its answer's request. `release` lets them answer. */
  async function heldChildren(host: Host, parent: ReturnType<Host['createAgent']>, count: number) {
    let holding = 0
    let allHeld!: () => void
    const held = new Promise<void>((resolve) => (allHeld = resolve))
    let release!: () => void
    const released = new Promise<void>((resolve) => (release = resolve))
    const models = Array.from({ length: count }, (_, i) => new HeldAnswer(i, () => void (++holding === count && allHeld()), released))
    const runs = await Promise.all(
      models.map((model, i) => {
        host.models.register(`held-${i}`, model)
        return host.spawn.start({ prompt: `task ${i}`, parent, agentOptions: { provider: `held-${i}` } })
      }),
    )
    await held
    return { models, runs, release }
  }

  it('a node SIGKILLed while its children wait on their host model: they complete on the other node, each moved once, its module tool run once', { timeout: 120_000 }, async () => {
    const queue = freshQueue()
    // Five children fit each node: ten children are five on each.
    const [a, b] = await Promise.all([0, 1].map(() => startTestNode({ redis: REDIS, queue, modules: [FAULT_MODULE], maxThreads: 1, childrenPerWorker: 5 })))
    processes.push(a!, b!)
    // Settles soon after the kill, and a loaded machine's late beats before it are not taken for one.
    const { host, parent } = bullmqHost(queue, [], 5000)
    const { models, runs, release } = await heldChildren(host, parent, 10)
    /** The node each child ran its module tool on, by the pid the tool reported. */
    const pidOf = (id: string) => {
      const result = host.agents.get(id)!.session.events.find((event) => event.type === 'tool/result')!
      return JSON.parse(textOf((result.data as { content: Parameters<typeof textOf>[0] }).content)).pid as number
    }
    const onA = runs.filter((run) => pidOf(run.id) === a!.process.pid)
    const onB = runs.filter((run) => pidOf(run.id) === b!.process.pid)
    expect([onA.length, onB.length]).toEqual([5, 5])

    a!.process.kill('SIGKILL')
    await Promise.all(onA.map((run) => eventOf(run, 'child/moved')))
    // The moved children wait in the queue for the slots of B's own, which finish now.
    release()
    for (const run of runs) {
      const i = runs.indexOf(run)
      const wasOnA = onA.includes(run)
      const result = await run.result
      // The aborted request streamed no usage: the tool call's and the answer's count.
      const usage = { inputTokens: 0, outputTokens: wasOnA ? 3 : 2 }
      expect(result).toEqual({ stopReason: 'completed', output: [{ type: 'text', text: `answer ${i}` }], usage, totalUsage: usage })
      const events = host.agents.get(run.id)!.session.events
      expect(contiguous(events)).toBe(true)
      expect(events.filter((event) => event.type === 'turn/start')).toHaveLength(1)
      // The module tool ran once, on the node the child started on.
      expect(events.filter((event) => event.type === 'tool/result')).toHaveLength(1)
      expect(moved(events)).toEqual(wasOnA ? [expect.stringMatching(new RegExp(`^node ${a!.id} stopped answering for \\d+ ms \\(it was killed or cut off from Redis\\): its children waiting on the host were placed again, the others given up$`))] : [])
      expect(models[i]!.requests).toHaveLength(wasOnA ? 3 : 2)
      // The request made again on B went on with the turn: it carries the tool's result.
      if (wasOnA) expect(models[i]!.requests[2]!.messages).toEqual(models[i]!.requests[1]!.messages)
      await run.dispose()
    }
  })

  it('a node SIGKILLed while its children wait on their host model, beside a node this host never met: they are placed again there and complete', { timeout: 120_000 }, async () => {
    const queue = freshQueue()
    const node = () => startTestNode({ redis: REDIS, queue, modules: [FAULT_MODULE], maxThreads: 1, childrenPerWorker: 5 })
    const a = await node()
    processes.push(a)
    const { host, parent } = bullmqHost(queue, [], 5000)
    const { runs, release } = await heldChildren(host, parent, 3)
    // B serves the queue from now on, and has taken no job of this host: no link joins them.
    const b = await node()
    processes.push(b)
    a.process.kill('SIGKILL')
    await Promise.all(runs.map((run) => eventOf(run, 'child/moved')))
    release()
    for (const [i, run] of runs.entries()) {
      expect(await run.result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: `answer ${i}` }] })
      const events = host.agents.get(run.id)!.session.events
      expect(moved(events)).toEqual([expect.stringMatching(new RegExp(`^node ${a.id} stopped answering for \\d+ ms \\(it was killed or cut off from Redis\\): its children waiting on the host were placed again, the others given up$`))])
      // The module tool ran once, on A.
      expect(events.filter((event) => event.type === 'tool/result')).toHaveLength(1)
      await run.dispose()
    }
  })
})
