/**
 * The BullMQ transport against the real Redis, with worker nodes of each test's own (separate
 * processes, on a queue of their own): placement over two nodes, the queue as back-pressure,
 * abort while queued, the grace enforced by the node, a node killed, a host killed, a node shut
 * down, a queue a node does not serve, and a node of another protocol version.
 *
 * Skipped without a Redis (see test/support/redis.ts); with CI set, a missing Redis fails the run.
 */
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { Queue, Worker } from 'bullmq'
import { Redis } from 'ioredis'
import { describe, it } from 'vitest'
import { createHost, ScriptedModel, textOf, textResponse, toolCallResponse, type Host, type ModelRequest, type ScriptEntry } from 'subagent-worker'
import { bullmqTransport } from 'subagent-worker/bullmq'
import { BULLMQ } from '../support/harness.js'
import { startTestNode, type TestNode } from '../support/nodes.js'

const FAULT_MODULE = fileURLToPath(new URL('../fixtures/fault-module.mjs', import.meta.url))
const HOST_DIES = fileURLToPath(new URL('../fixtures/remote-host-dies.mjs', import.meta.url))
const REDIS = BULLMQ?.redis ?? ''

/** What one test started, stopped when it ends: the tests run concurrently, each on a queue and nodes of its own. */
class Scope {
  readonly nodes: TestNode[] = []
  readonly hosts: Host[] = []

  async close(): Promise<void> {
    await Promise.all(this.hosts.map((host) => host.close()))
    await Promise.all(this.nodes.map((node) => node.stop()))
  }

  async node(queue: string, options: { maxThreads?: number; childrenPerWorker?: number; extra?: string[] } = {}): Promise<TestNode> {
    const started = await startTestNode({ redis: REDIS, queue, modules: [FAULT_MODULE], maxThreads: options.maxThreads ?? 1, childrenPerWorker: options.childrenPerWorker ?? 2, ...(options.extra ? { extra: options.extra } : {}) })
    this.nodes.push(started)
    return started
  }

  host(queue: string, script: ScriptEntry[] = [], options: { abortGraceMs?: number; nodeSilenceMs?: number } = {}) {
    const { nodeSilenceMs, ...rest } = options
    const made = createHost({ transport: bullmqTransport({ connection: REDIS, queue, ...(nodeSilenceMs ? { nodeSilenceMs } : {}) }), agentModule: FAULT_MODULE, ...rest })
    this.hosts.push(made)
    const model = new ScriptedModel(script)
    made.models.register('scripted', model)
    const parent = made.createAgent({ options: { provider: 'scripted', model: 'm' } })
    return { host: made, model, parent }
  }
}

/** A scope for the running test, closed when it finishes. */
function scope(onTestFinished: (fn: () => Promise<void>) => void): Scope {
  const made = new Scope()
  onTestFinished(() => made.close())
  return made
}

const freshQueue = () => `t-${randomBytes(4).toString('hex')}`

/** A model that has the child call the module tool `where`, holds it `holdMs`, then answers with the tool's result. */
function whereThenAnswer(holdMs: number): ScriptEntry {
  return async (request: ModelRequest) => {
    const result = [...request.messages].reverse().find((message) => message.role === 'tool')
    if (!result) return toolCallResponse('w', 'where', {})
    await new Promise((resolve) => setTimeout(resolve, holdMs))
    return textResponse(textOf(result.content))
  }
}

async function waitFor(condition: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms
  while (!(await condition())) {
    if (Date.now() > end) throw new Error('timed out waiting')
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** BullMQ's count of waiting jobs on the depth-1 queue of `queue`. */
async function waiting(queue: string): Promise<number> {
  const connection = new Redis(REDIS)
  const bull = new Queue(`${queue}-v4-depth1`, { connection })
  try {
    return await bull.getWaitingCount()
  } finally {
    await bull.close()
    connection.disconnect()
  }
}

describe.skipIf(!BULLMQ).concurrent('bullmq transport on worker nodes', () => {
  it('children spread over both nodes; each node runs at most its capacity, the rest wait in the queue', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const [a, b] = await Promise.all([my.node(queue), my.node(queue)])
    const { host: h, parent } = my.host(queue, Array.from({ length: 20 }, () => whereThenAnswer(1500)))
    // Capacity: 2 nodes × 1 thread × 2 children. Six starts: four run, two wait in the queue.
    const starts = Array.from({ length: 6 }, () => h.spawn.start({ prompt: 'where are you?', parent }))
    const started: unknown[] = []
    for (const start of starts) void start.then((run) => started.push(run))
    await waitFor(() => started.length === 4)
    expect(await waiting(queue)).toBe(2)
    const runs = await Promise.all(starts)
    const results = await Promise.all(runs.map((run) => run.result))
    await Promise.all(runs.map((run) => run.dispose()))
    const pids = results.map((result) => JSON.parse(textOf(result.output)).pid as number)
    expect(results.every((result) => result.stopReason === 'completed')).toBe(true)
    expect(new Set(pids)).toEqual(new Set([a.process.pid, b.process.pid]))
  })

  it('an abort while queued removes the job; dispose() frees the slot for the next', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    await my.node(queue, { childrenPerWorker: 1 })
    const { host: h, parent } = my.host(queue, ['hang', textResponse('second')])
    const first = await h.spawn.start({ prompt: 'hold', parent })
    const controller = new AbortController()
    const queued = h.spawn.start({ prompt: 'never runs', parent, signal: controller.signal })
    await waitFor(async () => (await waiting(queue)) === 1)
    controller.abort({ kind: 'changed my mind' })
    await expect(queued).rejects.toThrow('aborted')
    await waitFor(async () => (await waiting(queue)) === 0)
    const next = h.spawn.start({ prompt: 'next', parent })
    await first.dispose()
    const run = await next
    expect(await run.result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'second' }] })
    await run.dispose()
  })

  it('after an abort the node gives a stuck child abortGraceMs, then terminates its thread', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const n = await my.node(queue)
    const { host: h, parent } = my.host(queue, [toolCallResponse('s', 'spin', {})], { abortGraceMs: 300 })
    const controller = new AbortController()
    const run = await h.spawn.start({ prompt: 'spin', parent, signal: controller.signal })
    // The tool call is on the host (module code runs once the events before it are sent): the tool spins now.
    await waitFor(() => (h.agents.get(run.id)?.session.events ?? []).some((event) => event.type === 'assistant/message'))
    controller.abort()
    const result = await run.result
    await run.dispose()
    expect(result.stopReason).toBe('aborted')
    expect(result.diagnostic).toBe(`the child did not stop within abortGraceMs (300 ms) of being cancelled, so its worker thread on node ${n.id} was terminated`)
  })

  it('a thread that dies on a node ends its child error, naming the cause; the node goes on', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    await my.node(queue)
    const { host: h, parent } = my.host(queue, [toolCallResponse('x', 'exit', { code: 7 }), textResponse('after')])
    const result = await h.spawn.run({ prompt: 'exit', parent })
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toMatch(/the child's worker thread exited with code 7/)
    expect(await h.spawn.run({ prompt: 'again', parent })).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'after' }] })
  })

  it('a node killed with SIGKILL: its children end error naming the node, with everything they emitted kept', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const n = await my.node(queue)
    const { host: h, parent } = my.host(queue, ['hang'], { nodeSilenceMs: 1000 })
    const run = await h.spawn.start({ prompt: 'stream then wait', parent })
    await waitFor(() => (h.agents.get(run.id)?.session.events ?? []).some((event) => event.type === 'assistant/chunk'))
    const killedAt = performance.now()
    n.process.kill('SIGKILL')
    const result = await run.result
    const settledMs = performance.now() - killedAt
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toMatch(new RegExp(`^node ${n.id} stopped answering for \\d+ ms \\(it was killed or cut off from Redis\\), so its children were given up$`))
    const events = h.agents.get(run.id)!.session.events
    expect(events.filter((event) => event.type === 'assistant/chunk').map((event) => (event.data as { chunk: { text: string } }).chunk.text).join('')).toBe('partial')
    await run.dispose()
    // Reported, not asserted: the bound is the heartbeat's (nodeSilenceMs + one beat).
    console.log(`a SIGKILLed node's child settled ${Math.round(settledMs)} ms after the kill (nodeSilenceMs 1000)`)
  })

  it('a host that dies leaves no orphans: its node notices the silence and frees the slots', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    await my.node(queue, { childrenPerWorker: 1, extra: ['--host-silence-ms', '1000'] })
    const doomed = spawn(process.execPath, [HOST_DIES, REDIS, queue, FAULT_MODULE], { stdio: ['ignore', 'pipe', 'inherit'] })
    let said = ''
    doomed.stdout!.on('data', (chunk: Buffer) => (said += chunk.toString()))
    await waitFor(() => said.includes('running'))
    doomed.kill('SIGKILL')
    // The only slot is the dead host's child's until the node lets it go.
    const { host: h, parent } = my.host(queue, [textResponse('the slot is free')])
    expect(await h.spawn.run({ prompt: 'hi', parent })).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'the slot is free' }] })
  })

  it('SIGTERM: the node takes no new job, lets running children finish, then ends the rest aborted', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const n = await my.node(queue, { extra: ['--shutdown-ms', '2000'] })
    const slow: ScriptEntry = { delayMs: 200, chunks: textResponse('finished in time') }
    const { host: h, parent } = my.host(queue, [slow, 'hang'])
    const [finishing, stuck] = await Promise.all([h.spawn.start({ prompt: 'a', parent }), h.spawn.start({ prompt: 'b', parent })])
    n.process.kill('SIGTERM')
    const [done, cut] = await Promise.all([finishing.result, stuck.result])
    const byText = [done, cut].sort((x) => (x.stopReason === 'completed' ? -1 : 1))
    expect(byText[0]).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'finished in time' }] })
    expect(byText[1]).toMatchObject({ stopReason: 'aborted', diagnostic: `node ${n.id} shut down before the child finished` })
    await Promise.all([finishing.dispose(), stuck.dispose()])
    await waitFor(() => n.process.exitCode !== null)
    expect(n.process.exitCode).toBe(0)
  })

  it('a node takes jobs from its own queue only', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const served = freshQueue()
    await my.node(served)
    const other = freshQueue()
    const { host: h, parent } = my.host(other, [textResponse('never')])
    const controller = new AbortController()
    const start = h.spawn.start({ prompt: 'anyone?', parent, signal: controller.signal })
    await waitFor(async () => (await waiting(other)) === 1)
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(await waiting(other)).toBe(1)
    controller.abort()
    await expect(start).rejects.toBeDefined()
  })

  it('a node that dies holding a job before a word about its child: the start fails once the job is lost, never hangs', async ({ expect, onTestFinished }) => {
    const queue = freshQueue()
    const my = scope(onTestFinished)
    const { host: h, parent } = my.host(queue, [textResponse('never')])
    // A "node" that takes the job and goes silent: its lock is not renewed, as a dead process's is not.
    const connection = new Redis(REDIS, { maxRetriesPerRequest: null })
    const silent = new Worker(`${queue}-v4-depth1`, () => new Promise(() => {}), { connection, lockDuration: 500, skipLockRenewal: true })
    onTestFinished(async () => {
      await silent.close(true)
      connection.disconnect()
    })
    await expect(h.spawn.start({ prompt: 'hi', parent })).rejects.toThrow('the node that took this child from the queue stopped before building it')
  }, 30_000)

  it('a node of another protocol version is refused: the start fails saying so', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const { host: h, parent } = my.host(queue, [textResponse('never')])
    // A node of frame protocol v3 that somehow took the job: it says hello in its version.
    const connection = new Redis(REDIS, { maxRetriesPerRequest: null })
    const publisher = new Redis(REDIS)
    const { serialize } = await import('node:v8')
    const old = new Worker(`${queue}-v4-depth1`, async (job) => {
      const data = job.data as { host: string; child: string }
      await publisher.publish(`${queue}:host:${data.host}`, serialize(['old-node', [{ type: 'hello', v: 3 }, { type: 'created', child: data.child }]]))
    }, { connection })
    try {
      await expect(h.spawn.start({ prompt: 'hi', parent })).rejects.toThrow('node old-node speaks frame protocol v3 but this host speaks v4: both must come from the same version of subagent-worker')
    } finally {
      await old.close()
      connection.disconnect()
      publisher.disconnect()
    }
  })
})
