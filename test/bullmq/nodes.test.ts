/**
 * The BullMQ transport against the real Redis, with worker nodes of each test's own (separate
 * processes, on a queue of their own): placement over two nodes, the queue as back-pressure,
 * abort while queued, a host model's text kept in step when a child is cancelled mid-stream, the
 * grace enforced by the node, a node killed, a host killed, a node shut
 * down, a queue a node does not serve, a job edited in Redis (to carry a create, or to be no
 * child job at all), calls forged by module code on a node, a claim forged by a client that did
 * not take the job, a node of another
 * protocol version; and direct placement: a start on a node with room goes with no job, a node
 * with none refuses and its host queues the child, a node silent after a direct create fails the
 * start (never queued again: it may have run), and the room a node tells its host.
 *
 * Skipped without a Redis (see test/support/redis.ts); with CI set, a missing Redis fails the run.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { getPriority } from 'node:os'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { deserialize, serialize } from 'node:v8'
import { Queue, QueueEvents, Worker } from 'bullmq'
import { Redis } from 'ioredis'
import { describe, it } from 'vitest'
import { createHost, defineTool, ScriptedModel, textOf, textResponse, toolCallResponse, type Host, type ModelRequest, type ScriptEntry } from 'subagent-worker'
import { bullmqTransport } from 'subagent-worker/bullmq'
import { PROTOCOL_VERSION } from '../../dist/protocol/messages.js'
import { eventOf, expectCancelledMidStream } from '../support/driver-helpers.js'
import { BULLMQ } from '../support/harness.js'
import { gate } from '../support/loop-helpers.js'
import { moved } from '../support/moves.js'
import { startTestNode, type TestNode } from '../support/nodes.js'
import { Watch } from '../support/watch.js'

const FAULT_MODULE = fileURLToPath(new URL('../fixtures/fault-module.mjs', import.meta.url))
const HOST_DIES = fileURLToPath(new URL('../fixtures/remote-host-dies.mjs', import.meta.url))
const WIRE_MODULE = fileURLToPath(new URL('../fixtures/wire-module.mjs', import.meta.url))
const NEVER_LOADS = fileURLToPath(new URL('../fixtures/never-loads-module.mjs', import.meta.url))
const REDIS = BULLMQ?.redis ?? ''
/** The depth-1 BullMQ queue behind a transport's `queue`. */
const depth1 = (queue: string) => `${queue}-v${PROTOCOL_VERSION}-depth1`

/** What one test started, stopped when it ends: each test has a queue and nodes of its own. */
class Scope {
  readonly nodes: TestNode[] = []
  readonly hosts: Host[] = []

  async close(): Promise<void> {
    await Promise.all(this.hosts.map((host) => host.close()))
    await Promise.all(this.nodes.map((node) => node.stop()))
  }

  async node(queue: string, options: { maxThreads?: number; childrenPerWorker?: number; extra?: string[]; module?: string } = {}): Promise<TestNode> {
    const started = await startTestNode({ redis: REDIS, queue, modules: [options.module ?? FAULT_MODULE], maxThreads: options.maxThreads ?? 1, childrenPerWorker: options.childrenPerWorker ?? 2, ...(options.extra ? { extra: options.extra } : {}) })
    this.nodes.push(started)
    return started
  }

  host(queue: string, script: ScriptEntry[] = [], options: { abortGraceMs?: number; nodeSilenceMs?: number; placementTimeoutMs?: number; module?: string } = {}) {
    const { nodeSilenceMs, placementTimeoutMs, module = FAULT_MODULE, ...rest } = options
    const made = createHost({ transport: bullmqTransport({ connection: REDIS, queue, ...(nodeSilenceMs ? { nodeSilenceMs } : {}), ...(placementTimeoutMs ? { placementTimeoutMs } : {}) }), agentModule: module, ...rest })
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

/**
 * For a host whose test is not about a node falling silent: a loaded machine can hold a live
 * node's heartbeat past the default nodeSilenceMs (3 s), and the test would then be about that.
 */
const PATIENT = { nodeSilenceMs: 30_000 }

const freshQueue = () => `t-${randomBytes(4).toString('hex')}`

/** Resolves once `child` printed `text` on stdout; rejects if it exits first. */
function printed(child: ChildProcess, text: string): Promise<void> {
  let said = ''
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => (said += chunk.toString()).includes(text) && resolve())
    child.once('exit', (code, signal) => reject(new Error(`the process exited (${code ?? signal}) before printing ${text}: ${said}`)))
  })
}

/** The last tool result the child was given, if any. */
const lastToolResult = (request: ModelRequest) => [...request.messages].reverse().find((message) => message.role === 'tool')

/** A model that has the child call the module tool `where`, holds it until `held` settles, then answers with the tool's result. */
function whereThenAnswer(held: Promise<void>): ScriptEntry {
  return async (request: ModelRequest) => {
    const result = lastToolResult(request)
    if (!result) return toolCallResponse('w', 'where', {})
    await held
    return textResponse(textOf(result.content))
  }
}

/** Resolves once `n` of `promises` have fulfilled. */
function fulfilled(promises: Array<Promise<unknown>>, n: number): Promise<void> {
  let count = 0
  return new Promise((resolve) => {
    for (const promise of promises) void promise.then(() => ++count === n && resolve(), () => {})
  })
}

/**
 * Resolves with the id of the job of the `nth` (default first) `event` BullMQ reports ('waiting':
 * queued; 'removed'; 'completed': done, so never taken again) on the depth-1 queue of `queue`, counting only `jobId`'s if given. The
 * queue's event stream is read from its start, so events that came before the call count.
 */
async function queueEvent(queue: string, event: 'waiting' | 'removed' | 'completed', which: { nth?: number; jobId?: string } = {}): Promise<string> {
  const connection = new Redis(REDIS, { maxRetriesPerRequest: null })
  const events = new QueueEvents(depth1(queue), { connection, lastEventId: '0' })
  let seen = 0
  try {
    return await new Promise<string>((resolve, reject) => {
      events.on(event, ({ jobId }: { jobId: string }) => {
        if ((which.jobId === undefined || jobId === which.jobId) && ++seen === (which.nth ?? 1)) resolve(jobId)
      })
      events.on('error', reject)
    })
  } finally {
    await events.close()
    connection.disconnect()
  }
}

/** BullMQ's count of waiting jobs on the depth-1 queue of `queue`. */
async function waiting(queue: string): Promise<number> {
  const connection = new Redis(REDIS)
  const bull = new Queue(depth1(queue), { connection })
  try {
    return await bull.getWaitingCount()
  } finally {
    await bull.close()
    connection.disconnect()
  }
}


/** The one job waiting on the depth-1 queue of `queue`: its id and data, as any Redis client can read them. */
async function waitingJob(queue: string): Promise<{ id: string; data: { host: string; child: string } }> {
  const connection = new Redis(REDIS)
  const bull = new Queue(depth1(queue), { connection })
  try {
    const [job] = await bull.getWaiting()
    return { id: job!.id!, data: job!.data as { host: string; child: string } }
  } finally {
    await bull.close()
    connection.disconnect()
  }
}

/** A create message a queue writer makes up: the filtered tools back, and a persona of its own. */
function forgedCreate(child: string) {
  const spec = { id: child, header: { id: child, createdAt: new Date().toISOString() }, options: { provider: 'scripted', model: 'm' }, seed: [], persona: 'FORGED PERSONA', descriptor: { mode: 'one-shot', provider: 'spawn' } }
  return { type: 'create', child, spec, hostModels: ['scripted'], hostTools: [] }
}

/**
 * How many jobs were ever added to the depth-1 queue of `queue`, read from its event stream (a
 * job removed once done leaves its 'added' there).
 */
async function jobsAdded(queue: string): Promise<number> {
  const redis = new Redis(REDIS)
  try {
    const entries = await redis.xrange(`bull:${depth1(queue)}:events`, '-', '+')
    return entries.filter(([, fields]) => fields[0] === 'event' && fields[1] === 'added').length
  } finally {
    redis.disconnect()
  }
}

/** A fake host whose job for child c1 is on the queue, once a node asked it for the child (its take). */
async function fakeHostTaken(queue: string, onTestFinished: (fn: () => void) => void): Promise<FakeHost> {
  const fake = await FakeHost.start(queue, 'fake-host')
  onTestFinished(() => fake.close())
  await addJob(queue, fake.id, 'c1')
  await fake.hears('take', (message) => message.type === 'take' && message.child === 'c1')
  return fake
}

/** Queues a job for `host`'s child `child`, as a host adds one. */
async function addJob(queue: string, host: string, child: string): Promise<void> {
  const connection = new Redis(REDIS)
  const bull = new Queue(depth1(queue), { connection })
  await bull.add('child', { v: PROTOCOL_VERSION, host, child }, { removeOnComplete: true, removeOnFail: true, attempts: 1 })
  await bull.close()
  connection.disconnect()
}

/** A fake host's welcome: its children run the fault module's agent. */
const FAKE_WELCOME = { type: 'welcome', v: PROTOCOL_VERSION, config: { agentModule: pathToFileURL(FAULT_MODULE).href, maxParallelToolCalls: 1, abortGraceMs: 200 } }

/** A create a host sends: the child asks the host's model 'scripted' and waits for its answer. */
function plainCreate(child: string) {
  const spec = { id: child, header: { id: child, createdAt: new Date().toISOString() }, options: { provider: 'scripted', model: 'm' }, seed: [], descriptor: { mode: 'one-shot', provider: 'spawn' } }
  return { type: 'create', child, spec, hostModels: ['scripted'], hostTools: [] }
}

type Heard = { type: string; child?: string; [field: string]: unknown }

/** Any Redis client posing as a host: it hears a node on its channel and publishes frames in a host's envelope, on the link the node last spoke on. */
class FakeHost {
  readonly heard: Heard[] = []
  /** Each frame heard, with the link it came on. */
  readonly frames: Array<{ link: string; frame: Heard[] }> = []
  #link = ''
  readonly #watch = new Watch()
  readonly #publisher = new Redis(REDIS)
  readonly #subscriber = new Redis(REDIS)
  readonly #beats: NodeJS.Timeout[] = []

  private constructor(readonly queue: string, readonly id: string) {}

  static async start(queue: string, id: string): Promise<FakeHost> {
    const fake = new FakeHost(queue, id)
    fake.#subscriber.on('messageBuffer', (_channel: Buffer, bytes: Buffer) => {
      const [, frame, link] = deserialize(bytes) as [string, Heard[], string]
      fake.#link = link
      fake.frames.push({ link, frame })
      fake.heard.push(...frame)
      fake.#watch.changed()
    })
    await fake.#subscriber.subscribe(`${queue}:host:${id}`)
    return fake
  }

  /** Resolves with the frame that opened a link other than `after` (its hello first), heard before the call or after. */
  async hearsNextLink(after: string): Promise<{ link: string; frame: Heard[] }> {
    const opens = ({ link, frame }: { link: string; frame: Heard[] }) => link !== after && frame[0]?.type === 'hello'
    await this.#watch.until("the next link's hello", () => this.frames.some(opens))
    return this.frames.find(opens)!
  }

  /** Resolves with the first message heard that `matches`, before the call or after. */
  async hears(what: string, matches: (message: Heard) => boolean): Promise<Heard> {
    await this.#watch.until(what, () => this.heard.some(matches))
    return this.heard.find(matches)!
  }

  /** Sends `frame` on `link`: by default the one the node last spoke on. */
  send(node: string, frame: unknown[], link = this.#link): Promise<number> {
    return this.#publisher.publish(`${this.queue}:node:${node}`, serialize([this.id, frame, link]))
  }

  /**
   * Pings `link` as a host's heartbeat does (every 500 ms) until close: a node lets a link go
   * once its host is silent for its --host-silence-ms, and building a child on a loaded machine
   * may take longer than that.
   */
  beat(node: string, link: string): void {
    let n = 0
    // A ping still on its way when the fake closes is rejected with its connection: nothing to tell.
    this.#beats.push(setInterval(() => void this.send(node, [{ type: 'ping', n: ++n }], link).catch(() => {}), 500))
  }

  close(): void {
    for (const beat of this.#beats) clearInterval(beat)
    this.#publisher.disconnect()
    this.#subscriber.disconnect()
  }
}

/**
 * A FakeNode `id` that proved itself to the host as a node does: a BullMQ Worker of its name
 * holds the job of a first start (`first`), and the fake takes that child with the job's lock,
 * claiming room for `free` more. `answer` is the fake's, from the create of the first child on.
 */
async function provenFake(queue: string, h: Host, parent: Parameters<Host['spawn']['start']>[0]['parent'], id: string, onTestFinished: (fn: () => Promise<void> | void) => void, answer: (message: { type: string; child?: string }) => unknown[], free = 5) {
  const connection = new Redis(REDIS, { maxRetriesPerRequest: null })
  let took!: (job: { data: { host: string; child: string }; token: string }) => void
  const held = new Promise<{ data: { host: string; child: string }; token: string }>((resolve) => (took = resolve))
  const holder = new Worker(depth1(queue), (job, token) => (took({ data: job.data, token: token! }), new Promise(() => {})), { connection, name: id })
  onTestFinished(async () => {
    await holder.close(true)
    connection.disconnect()
  })
  const first = h.spawn.start({ prompt: 'first', parent })
  first.catch(() => {})
  const { data, token } = await held
  const fake = await FakeNode.start(queue, data.host, id, answer)
  onTestFinished(() => fake.close())
  await fake.send([{ type: 'hello', v: PROTOCOL_VERSION }, { type: 'take', child: data.child, token }, { type: 'room', level: 1, free, placed: 0 }])
  await fake.hears('create')
  return { fake, first }
}

/** Whether a message heard is of `type`. */
const said = (type: string) => (message: { type: string }) => message.type === type

/** Any Redis client posing as a node: it publishes frames in a node's envelope and hears what the host answers. */
class FakeNode {
  readonly heard: Array<{ type: string }> = []
  /** The link each frame heard was sent on. */
  readonly links: string[] = []
  readonly #watch = new Watch()
  readonly #publisher = new Redis(REDIS)
  readonly #subscriber = new Redis(REDIS)

  private constructor(readonly queue: string, readonly host: string, readonly id: string) {}

  static async start(queue: string, host: string, id: string, answer: (message: { type: string; child?: string }) => unknown[] = () => []): Promise<FakeNode> {
    const fake = new FakeNode(queue, host, id)
    fake.#subscriber.on('messageBuffer', (_channel: Buffer, bytes: Buffer) => {
      const [, frame, link] = deserialize(bytes) as [string, Array<{ type: string; child?: string }>, string]
      fake.links.push(link)
      for (const message of frame) {
        fake.heard.push(message)
        fake.#watch.changed()
        const reply = answer(message)
        if (reply.length > 0) void fake.send(reply)
      }
    })
    await fake.#subscriber.subscribe(`${queue}:node:${id}`)
    return fake
  }

  /** Resolves once a message of one of `types` was heard, before the call or after. */
  hears(...types: string[]): Promise<void> {
    return this.#watch.until(`${types.join(' or ')} heard by ${this.id}`, () => this.heard.some((message) => types.includes(message.type)))
  }

  /** Resolves once `n` messages of `type` were heard, before the call or after. */
  hearsTimes(type: string, n: number): Promise<void> {
    return this.#watch.until(`${n} ${type} heard by ${this.id}`, () => this.heard.filter((message) => message.type === type).length >= n)
  }

  /** Sends `frame` on `link`; a link of '' is an older node's envelope, which names none. */
  send(frame: unknown[], link = ''): Promise<number> {
    return this.#publisher.publish(`${this.queue}:host:${this.host}`, serialize([this.id, frame, link]))
  }

  close(): void {
    this.#publisher.disconnect()
    this.#subscriber.disconnect()
  }
}

// One test at a time: each starts node processes of its own, and a dozen of them starting at once on
// two loaded cores held live nodes' heartbeats past any silence bound. Generous per test, too.
describe.skipIf(!BULLMQ)('bullmq transport on worker nodes', { timeout: 120_000 }, () => {
  it('children spread over both nodes; each node runs at most its capacity, the rest wait in the queue', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const [a, b] = await Promise.all([my.node(queue), my.node(queue)])
    // The children hold their slots until the test has looked at the queue.
    const held = gate()
    const { host: h, parent } = my.host(queue, Array.from({ length: 20 }, () => whereThenAnswer(held.promise)), PATIENT)
    // Capacity: 2 nodes × 1 thread × 2 children. Six starts: four run, two wait in the queue.
    const starts = Array.from({ length: 6 }, () => h.spawn.start({ prompt: 'where are you?', parent }))
    await fulfilled(starts, 4)
    expect(await waiting(queue)).toBe(2)
    held.open()
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
    const { host: h, parent } = my.host(queue, ['hang', textResponse('second')], PATIENT)
    const first = await h.spawn.start({ prompt: 'hold', parent })
    const controller = new AbortController()
    const queued = h.spawn.start({ prompt: 'never runs', parent, signal: controller.signal })
    // The first child's job was queued (and taken) before this one's.
    const job = await queueEvent(queue, 'waiting', { nth: 2 })
    controller.abort({ kind: 'changed my mind' })
    await expect(queued).rejects.toThrow('aborted')
    await queueEvent(queue, 'removed', { jobId: job })
    expect(await waiting(queue)).toBe(0)
    const next = h.spawn.start({ prompt: 'next', parent })
    await first.dispose()
    const run = await next
    expect(await run.result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'second' }] })
    await run.dispose()
  })

  it("a host model's text is the host's record: a child cancelled mid-stream on a node ends aborted with the text sent before the abort, its record in sequence", async ({ onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    await my.node(queue)
    const { host: h, parent } = my.host(queue, [], PATIENT)
    await expectCancelledMidStream(h, parent)
  })

  it("a forged host-model call from module code on a node is served and counted by the host: what it streamed spends limits.maxTotalTokens though the runner never recorded it", async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    await my.node(queue, { module: WIRE_MODULE })
    const forged = { frame: [{ type: 'rpc/call', child: '$self', call: 777, method: 'model', payload: { provider: 'scripted' } }], reply: 777 }
    const served = { type: 'usage' as const, inputTokens: 500, outputTokens: 70 }
    const { host: h, model, parent } = my.host(queue, [toolCallResponse('f', 'forge', forged), [served, { type: 'finish', reason: 'stop' }], textResponse('never')], { ...PATIENT, module: WIRE_MODULE })
    const child = await h.spawn.start({ prompt: 'go', parent, signal: new AbortController().signal, limits: { maxTotalTokens: 500 } })
    const result = await child.result
    const events = h.agents.get(child.id)!.session.events
    await child.dispose()
    // The honest step and the forged call were served; the step after them was refused.
    expect(model.requests).toHaveLength(2)
    const reported = events.flatMap((event) => (event.type === 'assistant/message' && event.data.usage ? [event.data.usage] : []))
    const sum = (key: 'inputTokens' | 'outputTokens') => reported.reduce((total, usage) => total + usage[key], 0)
    expect(sum('inputTokens') + sum('outputTokens')).toBeLessThan(500)
    expect(result).toMatchObject({ stopReason: 'aborted', diagnostic: 'the child exceeded limits.maxTotalTokens (500 tokens)', usage: { inputTokens: sum('inputTokens'), outputTokens: sum('outputTokens') } })
    expect(result.totalUsage).toEqual(result.usage)
  })

  it("forged calls from module code on a node are refused as on a thread: a host tool the child's filter denies, one needing approval, arguments breaking the schema, a payload not the method's, another model; none runs", async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    await my.node(queue, { module: WIRE_MODULE })
    const forge = (payload: object, method = 'tool') => toolCallResponse('f', 'forge', { frame: [{ type: 'rpc/call', child: '$self', call: 777, method, payload }], reply: 777 })
    const cases = [
      { payload: { name: 'secret', callId: 'x', args: {} }, request: { toolFilter: { deny: ['secret'] } }, error: { name: 'ToolError', message: 'unknown tool "secret"', code: 'UNKNOWN_TOOL' } },
      { payload: { name: 'guarded', callId: 'x', args: {} }, error: { code: 'DENIED', message: expect.stringContaining('needs approval') } },
      { payload: { name: 'typed', callId: 'x', args: { n: 'not a number' } }, error: { code: 'INVALID_ARGS', message: expect.stringContaining('invalid arguments for "typed"') } },
      { payload: { name: 5, callId: 'x', args: {} }, error: { name: 'ProtocolError', message: expect.stringContaining('invalid payload for rpc method "tool"') } },
      { payload: { provider: 'other' }, method: 'model', error: { name: 'ProtocolError', message: expect.stringContaining('may call only its own model "scripted", not "other"') } },
    ]
    const { host: h, parent } = my.host(queue, cases.flatMap((c) => [forge(c.payload, c.method), textResponse('done')]), { ...PATIENT, module: WIRE_MODULE })
    const runs: string[] = []
    for (const name of ['secret', 'guarded', 'typed']) {
      h.tools.register(defineTool({ name, description: `The host's ${name}.`, parameters: { type: 'object', properties: { n: { type: 'integer' } } }, needsApproval: name === 'guarded', execute: () => (runs.push(name), 'ran') }))
    }
    const other = new ScriptedModel([textResponse('should never stream')])
    h.models.register('other', other)
    for (const { request, error } of cases) {
      const child = await h.spawn.start({ prompt: 'go', parent, signal: new AbortController().signal, ...request })
      expect((await child.result).stopReason).toBe('completed')
      const forged = h.agents.get(child.id)!.session.events.find((event) => event.type === 'tool/result' && event.data.name === 'forge')
      expect(forged?.data).toMatchObject({ value: { type: 'rpc/error', error } })
      await child.dispose()
    }
    expect(runs).toEqual([])
    expect(other.requests).toHaveLength(0)
  })

  it('after an abort the node gives a stuck child abortGraceMs, then terminates its thread', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const n = await my.node(queue)
    const { host: h, parent } = my.host(queue, [toolCallResponse('s', 'spin', {})], { abortGraceMs: 300, ...PATIENT })
    const controller = new AbortController()
    const run = await h.spawn.start({ prompt: 'spin', parent, signal: controller.signal })
    // The tool call is on the host (module code runs once the events before it are sent): the tool spins now.
    await eventOf(run, 'assistant/message')
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
    const { host: h, parent } = my.host(queue, [toolCallResponse('x', 'exit', { code: 7 }), textResponse('after')], PATIENT)
    const result = await h.spawn.run({ prompt: 'exit', parent })
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toMatch(/the child's worker thread exited with code 7/)
    expect(await h.spawn.run({ prompt: 'again', parent })).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'after' }] })
  })

  it('a node killed with SIGKILL: its children end error naming the node, with everything they emitted kept', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const n = await my.node(queue)
    // Short enough to settle soon after the kill, long enough that a loaded machine's late beats before it are not taken for one.
    const nodeSilenceMs = 5000
    const { host: h, parent } = my.host(queue, ['hang'], { nodeSilenceMs })
    const run = await h.spawn.start({ prompt: 'stream then wait', parent })
    await eventOf(run, 'assistant/chunk')
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
    console.log(`a SIGKILLed node's child settled ${Math.round(settledMs)} ms after the kill (nodeSilenceMs ${nodeSilenceMs})`)
  })

  it('a host that dies leaves no orphans: its node notices the silence and frees the slots', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    await my.node(queue, { childrenPerWorker: 1, extra: ['--host-silence-ms', '1000'] })
    const doomed = spawn(process.execPath, [HOST_DIES, REDIS, queue, FAULT_MODULE], { stdio: ['ignore', 'pipe', 'inherit'] })
    await printed(doomed, 'running')
    doomed.kill('SIGKILL')
    // The only slot is the dead host's child's until the node lets it go.
    const { host: h, parent } = my.host(queue, [textResponse('the slot is free')], PATIENT)
    expect(await h.spawn.run({ prompt: 'hi', parent })).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'the slot is free' }] })
  })

  it('a SIGTERM sent the moment a node says it serves shuts it down as any other does: saying so, exit 0', async ({ expect }) => {
    const queue = freshQueue()
    // The line comes once the signal is handled; before, a quick operator's SIGTERM killed it outright now and then.
    for (let round = 0; round < 5; round++) {
      const n = await startTestNode({ redis: REDIS, queue, modules: [FAULT_MODULE], maxThreads: 1 })
      n.process.kill('SIGTERM')
      await n.exited
      expect({ code: n.process.exitCode, signal: n.process.signalCode }).toEqual({ code: 0, signal: null })
      expect(n.output()).toMatch(/shutting down: running children have \d+ ms/)
    }
  })

  it('SIGTERM: the node takes no new job, lets running children finish, then ends the rest aborted', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const n = await my.node(queue, { extra: ['--shutdown-ms', '5000'] })
    // One child answers only once the SIGTERM is sent: it is running then, and finishes within the shutdown time.
    const terminated = gate()
    const slow: ScriptEntry = async () => (await terminated.promise, textResponse('finished in time'))
    const { host: h, parent } = my.host(queue, [slow, 'hang'], PATIENT)
    const [finishing, stuck] = await Promise.all([h.spawn.start({ prompt: 'a', parent }), h.spawn.start({ prompt: 'b', parent })])
    n.process.kill('SIGTERM')
    terminated.open()
    const [done, cut] = await Promise.all([finishing.result, stuck.result])
    const byText = [done, cut].sort((x) => (x.stopReason === 'completed' ? -1 : 1))
    expect(byText[0]).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'finished in time' }] })
    expect(byText[1]).toMatchObject({ stopReason: 'aborted', diagnostic: `node ${n.id} shut down before the child finished` })
    await Promise.all([finishing.dispose(), stuck.dispose()])
    await n.exited
    expect(n.process.exitCode).toBe(0)
  })

  it("--nice-increment schedules a node's threads that much lower than the node (a thread has a nice value of its own on Linux only)", async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    await my.node(queue, { extra: ['--nice-increment', '4'] })
    // The node inherits this thread's nice value.
    const expected = process.platform === 'linux' ? Math.min(19, getPriority() + 4) : getPriority()
    const answer: ScriptEntry = (request: ModelRequest) => textResponse(textOf(lastToolResult(request)!.content))
    const { host: h, parent } = my.host(queue, [toolCallResponse('n', 'nice', {}), answer], PATIENT)
    const result = await h.spawn.run({ prompt: 'how nice?', parent })
    expect(result.stopReason).toBe('completed')
    expect(JSON.parse(textOf(result.output))).toEqual({ nice: expected })
  })

  it("a node's thread whose agent module never finishes loading is stopped after --load-timeout-ms: the start fails saying so, never hangs", async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    await my.node(queue, { module: NEVER_LOADS, extra: ['--load-timeout-ms', '300'] })
    const { host: h, parent } = my.host(queue, [textResponse('never')], { ...PATIENT, module: NEVER_LOADS })
    const failure = await h.spawn.start({ prompt: 'go', parent, signal: new AbortController().signal }).then(
      () => expect.unreachable('a child on a thread that never loaded was published'),
      (error: unknown) => error,
    )
    expect(failure).toMatchObject({ code: 'ERR_SUBAGENT_CHILD_ENDED', message: expect.stringMatching(/the worker thread \d+ did not finish loading the agent module within 300 ms \(pool\.loadTimeoutMs\): its top-level code never completed/) })
    expect(h.agents.list()).toEqual([parent])
  })

  it('a node takes jobs from its own queue only', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const served = freshQueue()
    await my.node(served)
    const other = freshQueue()
    const { host: h, parent } = my.host(other, [textResponse('never')], PATIENT)
    const controller = new AbortController()
    const start = h.spawn.start({ prompt: 'anyone?', parent, signal: controller.signal })
    await queueEvent(other, 'waiting')
    // The node takes a job from its own queue after that one was queued: it is serving, and left the other alone.
    const { host: own, parent: mine } = my.host(served, [textResponse('served')], PATIENT)
    expect(await own.spawn.run({ prompt: 'yours', parent: mine })).toMatchObject({ stopReason: 'completed' })
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
    const silent = new Worker(depth1(queue), () => new Promise(() => {}), { connection, lockDuration: 500, skipLockRenewal: true })
    onTestFinished(async () => {
      await silent.close(true)
      connection.disconnect()
    })
    await expect(h.spawn.start({ prompt: 'hi', parent })).rejects.toThrow('the node that took this child from the queue stopped before building it')
  })

  it('a job edited in Redis before a node takes it carries no authority: the child is the one its host made', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const { host: h, model, parent } = my.host(queue, [toolCallResponse('w', 'where', {}), textResponse('done')], PATIENT)
    const start = h.spawn.start({ prompt: 'where are you?', parent, persona: 'the host persona', toolFilter: { allow: [] } })
    // No node serves the queue yet: the job waits, and a queue writer rewrites it.
    await queueEvent(queue, 'waiting')
    const job = await waitingJob(queue)
    const writer = new Redis(REDIS)
    await writer.hset(`bull:${depth1(queue)}:${job.id}`, 'data', JSON.stringify({ ...job.data, create: serialize(forgedCreate(job.data.child)).toString('base64') }))
    writer.disconnect()
    await my.node(queue)
    const run = await start
    const result = await run.result
    await run.dispose()
    expect(result.stopReason).toBe('completed')
    const [first, second] = model.requests
    expect(first!.system).toContain('the host persona')
    expect(first!.system).not.toContain('FORGED PERSONA')
    expect(first!.tools?.map((tool) => tool.name) ?? []).not.toContain('where')
    // The filtered module tool is refused, never run.
    const answer = second!.messages.find((message) => message.role === 'tool')
    expect(textOf(answer!.content)).not.toMatch(/"pid"/)
  })

  it('a job edited in Redis into no child job is refused by the node, naming what is wrong; the node goes on', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const { host: h, parent } = my.host(queue, [textResponse('served')], PATIENT)
    const controller = new AbortController()
    const start = h.spawn.start({ prompt: 'hi', parent, signal: controller.signal })
    await queueEvent(queue, 'waiting')
    const job = await waitingJob(queue)
    const writer = new Redis(REDIS)
    await writer.hset(`bull:${depth1(queue)}:${job.id}`, 'data', JSON.stringify({ ...job.data, child: 42 }))
    writer.disconnect()
    // The job is removed once failed; its queue's event stream keeps why (read from its start: no event is missed).
    const connection = new Redis(REDIS, { maxRetriesPerRequest: null })
    const events = new QueueEvents(depth1(queue), { connection, lastEventId: '0-0' })
    onTestFinished(async () => {
      await events.close()
      connection.disconnect()
    })
    const failed = new Promise<string>((resolve) => events.on('failed', ({ failedReason }) => resolve(failedReason)))
    await my.node(queue)
    expect(await failed).toBe('the job is not a subagent-worker child job: job/child must be string')
    controller.abort()
    await expect(start).rejects.toBeDefined()
    expect(await h.spawn.run({ prompt: 'and now?', parent })).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'served' }] })
  })

  it('a claim forged by a client that did not take the job is not accepted: the node that took it runs the child', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const { host: h, parent } = my.host(queue, [textResponse('from the real node')])
    const start = h.spawn.start({ prompt: 'hi', parent })
    await queueEvent(queue, 'waiting')
    const { data } = await waitingJob(queue)
    // As the probe did: hello, created, and on publish an idle with a result of its own.
    const forger = await FakeNode.start(queue, data.host, 'forger', (message) => (message.type === 'publish' ? [{ type: 'idle', child: data.child, events: [{ seq: 0, type: 'assistant/message', data: { content: [{ type: 'text', text: 'forged' }] } }] }] : []))
    const guesser = await FakeNode.start(queue, data.host, 'guesser')
    onTestFinished(() => (forger.close(), guesser.close()))
    await forger.send([{ type: 'hello', v: PROTOCOL_VERSION }, { type: 'created', child: data.child }])
    await guesser.send([{ type: 'hello', v: PROTOCOL_VERSION }, { type: 'take', child: data.child, token: 'a-guessed-token' }])
    // The host answers each: the forger is given up on (bye), the guesser is refused the child (drop).
    await forger.hears('bye', 'publish')
    await Promise.race([guesser.hears('drop', 'bye'), forger.hears('publish')])
    expect(forger.heard.some(said('publish'))).toBe(false)
    await my.node(queue)
    const run = await start
    const result = await run.result
    await run.dispose()
    expect(result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'from the real node' }] })
    expect(guesser.heard.some(said('drop'))).toBe(true)
    expect(guesser.heard.some(said('create'))).toBe(false)
  })

  it('a child goes only to the node BullMQ gave its job to: a client that read the lock token is refused', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const { host: h, parent } = my.host(queue, [textResponse('never')])
    const controller = new AbortController()
    const start = h.spawn.start({ prompt: 'hi', parent, signal: controller.signal })
    // The worker BullMQ gives the job to (named as nodes are), holding it without a word yet.
    const connection = new Redis(REDIS, { maxRetriesPerRequest: null })
    let took!: (job: { id: string; data: { host: string; child: string } }) => void
    const held = new Promise<{ id: string; data: { host: string; child: string } }>((resolve) => (took = resolve))
    const holder = new Worker(depth1(queue), (job) => (took({ id: job.id!, data: job.data }), new Promise(() => {})), { connection, name: 'holder' })
    onTestFinished(async () => {
      await holder.close(true)
      connection.disconnect()
    })
    const { id, data } = await held
    // Any client can read the lock token; only the job's processor may use it.
    const redis = new Redis(REDIS)
    const token = await redis.get(`bull:${depth1(queue)}:${id}:lock`)
    redis.disconnect()
    const reader = await FakeNode.start(queue, data.host, 'reader')
    const node = await FakeNode.start(queue, data.host, 'holder')
    onTestFinished(() => (reader.close(), node.close()))
    await reader.send([{ type: 'hello', v: PROTOCOL_VERSION }, { type: 'take', child: data.child, token }])
    await reader.hears('drop', 'create')
    expect(reader.heard.some(said('create'))).toBe(false)
    await node.send([{ type: 'hello', v: PROTOCOL_VERSION }, { type: 'take', child: data.child, token }])
    await node.hears('create', 'drop')
    expect(node.heard.find(said('create'))).toMatchObject({ type: 'create', child: data.child, spec: { id: data.child } })
    controller.abort()
    await expect(start).rejects.toBeDefined()
  })

  it('a node of another protocol version is refused: the start fails saying so', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const { host: h, parent } = my.host(queue, [textResponse('never')])
    // A node of an older frame protocol that took the job (and holds it): it says hello in its version.
    const old = PROTOCOL_VERSION - 1
    const connection = new Redis(REDIS, { maxRetriesPerRequest: null })
    const publisher = new Redis(REDIS)
    const worker = new Worker(depth1(queue), async (job, token) => {
      const data = job.data as { host: string; child: string }
      await publisher.publish(`${queue}:host:${data.host}`, serialize(['old-node', [{ type: 'hello', v: old }, { type: 'take', child: data.child, token }]]))
      await new Promise(() => {})
    }, { connection, name: 'old-node' })
    try {
      await expect(h.spawn.start({ prompt: 'hi', parent })).rejects.toThrow(`node old-node speaks frame protocol v${old} but this host speaks v${PROTOCOL_VERSION}: both must come from the same version of subagent-worker`)
    } finally {
      await worker.close(true)
      connection.disconnect()
      publisher.disconnect()
    }
  })

  it('a start on a linked node with room goes to it directly: no job is queued, and the child runs there once', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const n = await my.node(queue)
    // Each child asks twice: for the module tool `where`, then for its answer.
    const { host: h, model, parent } = my.host(queue, Array.from({ length: 4 }, () => whereThenAnswer(Promise.resolve())), PATIENT)
    const first = await h.spawn.run({ prompt: 'where are you?', parent })
    // The first went through the queue: the node's link to this host, and its word on its room, came with it.
    expect(await jobsAdded(queue)).toBe(1)
    const second = await h.spawn.run({ prompt: 'and now?', parent })
    expect([first.stopReason, second.stopReason]).toEqual(['completed', 'completed'])
    expect(JSON.parse(textOf(second.output)).pid).toBe(n.process.pid)
    expect(await jobsAdded(queue)).toBe(1)
    expect(model.requests).toHaveLength(4)
  })

  it('a client that says hello and claims room, but never took a job, is given no child: the start is queued', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const { host: h, parent } = my.host(queue, [textResponse('one'), textResponse('two')], PATIENT)
    const first = h.spawn.start({ prompt: 'first', parent })
    await queueEvent(queue, 'waiting')
    const { data } = await waitingJob(queue)
    const poser = await FakeNode.start(queue, data.host, 'poser')
    onTestFinished(() => poser.close())
    await poser.send([{ type: 'hello', v: PROTOCOL_VERSION }, { type: 'room', level: 1, free: 100, placed: 0 }])
    await poser.hears('welcome')
    const second = h.spawn.start({ prompt: 'second', parent })
    await queueEvent(queue, 'waiting', { nth: 2 })
    await my.node(queue)
    const runs = await Promise.all([first, second])
    expect((await Promise.all(runs.map((run) => run.result))).map((result) => result.stopReason)).toEqual(['completed', 'completed'])
    await Promise.all(runs.map((run) => run.dispose()))
    expect(poser.heard.some(said('create'))).toBe(false)
  })

  it("a node's frame longer than one may be (a sparse array, a few bytes on the wire) is refused: its sender is told bye, never welcomed, and the host goes on", async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const { host: h, parent } = my.host(queue, [textResponse('one')], PATIENT)
    const first = h.spawn.start({ prompt: 'first', parent })
    await queueEvent(queue, 'waiting')
    const { data } = await waitingJob(queue)
    const poser = await FakeNode.start(queue, data.host, 'sparse')
    onTestFinished(() => poser.close())
    // Read index by index, fifty million steps of the host's loop (test/unit/envelope.test.ts: it is not).
    const frame: unknown[] = [{ type: 'hello', v: PROTOCOL_VERSION }]
    frame[50_000_000] = { type: 'room', level: 1, free: 100, placed: 0 }
    await poser.send(frame)
    await poser.hears('bye', 'welcome')
    expect(poser.heard.map((message) => message.type)).toEqual(['bye'])
    // The host goes on: a node runs the queued start.
    await my.node(queue)
    const run = await first
    expect((await run.result).stopReason).toBe('completed')
    await run.dispose()
  })

  it('a node with no room after all refuses a child placed on it directly; its host queues the child, which another node runs once', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const { host: h, model, parent } = my.host(queue, [textResponse('two')], PATIENT)
    // A node that proves itself (it takes the first start's job, held by a BullMQ Worker of its
    // name), tells the host it has room, and refuses every child it is given.
    const full = await provenFake(queue, h, parent, 'full', onTestFinished, (message) =>
      message.type === 'create' ? [{ type: 'create-failed', child: message.child, error: { name: 'Error', message: 'no room', code: 'ERR_SUBAGENT_NODE_FULL' } }] : [],
    )
    await expect(full.first).rejects.toThrow('no room')
    const refused = h.spawn.start({ prompt: 'second', parent })
    await queueEvent(queue, 'waiting', { nth: 2 })
    expect(full.fake.heard.filter(said('create'))).toHaveLength(2)
    await my.node(queue)
    const run = await refused
    expect(await run.result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'two' }] })
    await run.dispose()
    expect(model.requests).toHaveLength(1)
    expect(await jobsAdded(queue)).toBe(2)
  })

  it("a start does not pass its host's starts waiting in the queue: while one waits, the next is queued behind it though a node has room", async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const { host: h, parent } = my.host(queue, [], PATIENT)
    // A proven node with no room: the next start waits in the queue (the Worker of its name holds the first job, so it stays there).
    const busy = await provenFake(queue, h, parent, 'busy', onTestFinished, (message) => (message.type === 'create' ? [{ type: 'created', child: message.child }] : []), 0)
    const first = await busy.first
    const waits = new AbortController()
    const waiting2 = h.spawn.start({ prompt: 'second', parent, signal: waits.signal })
    waiting2.catch(() => {})
    await queueEvent(queue, 'waiting', { nth: 2 })
    const { data } = await waitingJob(queue)
    // Room now, told in a frame whose take the host answers (a guessed token: a drop), so the room was read before the next start.
    await busy.fake.send([{ type: 'room', level: 1, free: 5, placed: 0 }, { type: 'take', child: data.child, token: 'guessed' }])
    await busy.fake.hears('drop')
    const third = h.spawn.start({ prompt: 'third', parent, signal: waits.signal })
    third.catch(() => {})
    // Queued (its job added), or placed on the node past the one waiting: whichever comes first.
    await Promise.race([queueEvent(queue, 'waiting', { nth: 3 }), busy.fake.hearsTimes('create', 2)])
    expect(busy.fake.heard.filter(said('create'))).toHaveLength(1)
    waits.abort()
    await first.dispose()
  })

  it('a node silent after a child was placed on it directly fails the start, naming the node; the child is never queued again', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const { host: h, parent } = my.host(queue, [], { nodeSilenceMs: 1000 })
    // It builds the child it took, answers the heartbeat until a child is placed on it directly, then falls silent: it may have built that one.
    let creates = 0
    const mute = await provenFake(queue, h, parent, 'mute', onTestFinished, (message) => {
      if (message.type === 'create' && ++creates === 1) return [{ type: 'created', child: message.child }]
      return message.type === 'ping' && creates < 2 ? [{ type: 'pong', n: (message as { n?: number }).n }] : []
    })
    const taken = await mute.first
    await expect(h.spawn.start({ prompt: 'second', parent })).rejects.toThrow(/^node mute stopped answering for \d+ ms \(it was killed or cut off from Redis\), so its children were given up$/)
    expect(creates).toBe(2)
    expect(await jobsAdded(queue)).toBe(1)
    expect(await taken.result).toMatchObject({ stopReason: 'error' })
    await taken.dispose()
  })

  it('a take naming a child that runs on the link (another client posing as its node) is refused without a drop: the child is not let go', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const { host: h, parent } = my.host(queue, [], PATIENT)
    const posed = await provenFake(queue, h, parent, 'posed', onTestFinished, (message) => {
      if (message.type === 'create') return [{ type: 'created', child: message.child }]
      return message.type === 'ping' ? [{ type: 'pong', n: (message as { n?: number }).n }] : []
    })
    const run = await posed.first
    const pings = posed.fake.heard.filter(said('ping')).length
    await posed.fake.send([{ type: 'take', child: run.id, token: 'guessed' }])
    // The host reads a link's frames in order, and pings it on a timer: the next ping comes after any answer to the take.
    await posed.fake.hearsTimes('ping', pings + 1)
    expect(posed.fake.heard.filter((message) => message.type === 'drop' && (message as { child?: string }).child === run.id)).toEqual([])
    await run.dispose()
  })

  it('a node given a child that builds nothing, answering its pings all the while, fails the start after placementTimeoutMs and is told to drop it', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const { host: h, parent } = my.host(queue, [], { ...PATIENT, placementTimeoutMs: 1500 })
    const idle = await provenFake(queue, h, parent, 'idle', onTestFinished, (message) => (message.type === 'ping' ? [{ type: 'pong', n: (message as { n?: number }).n }] : []))
    await expect(idle.first).rejects.toMatchObject({
      code: 'ERR_SUBAGENT_NODE_LOST',
      message: 'the node given the child did not build it within placementTimeoutMs (1500 ms), so it was let go there; nothing of it ran, and the start may be tried again',
    })
    await idle.fake.hears('drop')
    expect(h.agents.list().map((agent) => agent.id)).toEqual([parent.id])
  })

  it("a node's hello on a link of its own ends the host's link before it, whose children not waiting on the host are given up; the old link's frames are not read, and the host answers on the new one", async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const { host: h, parent } = my.host(queue, [textResponse('never')], PATIENT)
    const linked = await provenFake(queue, h, parent, 'relinked', onTestFinished, (message) => (message.type === 'create' ? [{ type: 'created', child: message.child }] : []), 0)
    const first = await linked.first
    await linked.fake.send([{ type: 'hello', v: PROTOCOL_VERSION }], 'second')
    expect(await first.result).toMatchObject({ stopReason: 'error', diagnostic: 'node relinked opened another link to this host, so the one its children were on had ended: its children waiting on the host were placed again, the others given up' })
    // A frame on the old link is not read: on the new one, this child it was never given would end it.
    await linked.fake.send([{ type: 'created', child: 'never-given' }])
    // The new link stands: the host answers its take (a guessed token: a drop) on it.
    await linked.fake.send([{ type: 'take', child: 'never-given', token: 'guessed' }], 'second')
    await linked.fake.hears('drop')
    expect(linked.fake.heard.filter(said('welcome'))).toHaveLength(2)
    expect(linked.fake.heard.filter(said('bye'))).toHaveLength(1)
    expect(linked.fake.links.at(-1)).toBe('second')
    await first.dispose()
  })

  it("a child waiting on its host model when its node opens another link is placed again (the node let the old link's children go), and completes on a node that takes its job", async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const { host: h, model, parent } = my.host(queue, ['hang', textResponse('moved')], PATIENT)
    let given = ''
    const linked = await provenFake(queue, h, parent, 'relinked', onTestFinished, (message) => (message.type === 'create' ? ((given = message.child!), [{ type: 'created', child: message.child }]) : []), 0)
    const run = await linked.first
    // The child asks for its host model, which streams and holds: the host holds a call of it.
    await linked.fake.send([{ type: 'rpc/call', child: given, call: 1, method: 'model', payload: { provider: 'scripted' } }])
    await eventOf(run, 'assistant/chunk')
    await linked.fake.send([{ type: 'hello', v: PROTOCOL_VERSION }], 'second')
    await eventOf(run, 'child/moved')
    // Queued again (the new link proved nothing yet), and taken by a node of the test's.
    await my.node(queue)
    expect(await run.result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'moved' }] })
    const events = h.agents.get(run.id)!.session.events
    expect(moved(events)).toEqual(['node relinked opened another link to this host, so the one its children were on had ended: its children waiting on the host were placed again, the others given up'])
    expect(events.filter((event) => event.type === 'turn/start')).toHaveLength(1)
    // The held request was aborted, and made again where the child went on.
    expect(model.requests).toHaveLength(2)
    expect(model.requests[0]!.signal?.aborted).toBe(true)
    await run.dispose()
  })

  it("a node reads only its link's frames: a bye sent on another (a link that ended, heard late) leaves the child it asks for to run", async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const n = await my.node(queue, { extra: ['--host-silence-ms', '60000'] })
    const fake = await fakeHostTaken(queue, onTestFinished)
    await fake.send(n.id, [{ type: 'bye' }], 'a-link-that-ended')
    await fake.send(n.id, [FAKE_WELCOME, plainCreate('c1')])
    await fake.hears('created c1', (message) => message.type === 'created' && message.child === 'c1')
    await fake.send(n.id, [{ type: 'bye' }])
  })

  it("a take waits for its link's welcome: none goes on a link whose hello the host never heard; the next link's hello brings them, the one that rode the lost hello again, and both children run", async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    // It lets a silent host's link go after 3 s.
    const n = await my.node(queue, { extra: ['--host-silence-ms', '3000'] })
    // The first link's hello and take, as if published while the host's channel was reconnecting: the fake leaves them unanswered.
    const fake = await fakeHostTaken(queue, onTestFinished)
    const [first] = fake.frames
    expect(first!.frame.map(({ type }) => type)).toEqual(['hello', 'take'])
    await addJob(queue, fake.id, 'c2')
    // Once the first link is let go, the next opens with a hello; whichever take rides it, the other follows on it.
    const next = await fake.hearsNextLink(first!.link)
    await fake.send(n.id, [FAKE_WELCOME], next.link)
    // The next link's host is alive: it is not let go while its children are built.
    fake.beat(n.id, next.link)
    for (const child of ['c1', 'c2']) {
      await fake.hears(`take ${child} on the next link`, (message) => message.type === 'take' && message.child === child && fake.frames.some(({ link, frame }) => link === next.link && frame.includes(message)))
      await fake.send(n.id, [plainCreate(child)], next.link)
      await fake.hears(`created ${child}`, (message) => message.type === 'created' && message.child === child)
    }
    // Nothing more on the link the host never opened (it would read that as a frame of a link already ended).
    expect(fake.frames.filter(({ link }) => link === first!.link)).toEqual([first])
    await fake.send(n.id, [{ type: 'bye' }], next.link)
  })

  it("a take its host said bye to before answering (the host's channel dropped, and the take with it) goes back to the queue, and its child runs on the host's next link", async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const n = await my.node(queue, { extra: ['--host-silence-ms', '60000'] })
    const fake = await fakeHostTaken(queue, onTestFinished)
    const [first] = fake.frames
    // The host drops its link before answering, as a host whose channel's connection dropped does.
    await fake.send(n.id, [FAKE_WELCOME, { type: 'bye' }], first!.link)
    const next = await fake.hearsNextLink(first!.link)
    expect(next.frame).toContainEqual(expect.objectContaining({ type: 'take', child: 'c1' }))
    await fake.send(n.id, [FAKE_WELCOME, plainCreate('c1')], next.link)
    await fake.hears('created c1', (message) => message.type === 'created' && message.child === 'c1')
    await fake.send(n.id, [{ type: 'bye' }], next.link)
  })

  it('a host that refuses the link (bye before its welcome, as a host of another protocol version answers) is asked for the child once: the job ends unrun', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const n = await my.node(queue)
    const fake = await FakeHost.start(queue, 'other-version-host')
    onTestFinished(() => fake.close())
    await addJob(queue, fake.id, 'c1')
    const { link } = await fake.hearsNextLink('')
    await fake.send(n.id, [{ type: 'bye' }], link)
    // The queue's events are read from its start: the job's end is seen whenever it came.
    await queueEvent(queue, 'completed')
    // One hello and one take: the refused take did not go round again.
    expect(fake.frames.map(({ frame }) => frame.map(({ type }) => type))).toEqual([['hello', 'take']])
  })

  it("a job whose take no host answers goes back once, then ends: a dead host's jobs do not go round the nodes for good", async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    await my.node(queue, { extra: ['--host-silence-ms', '1000'] })
    const fake = await FakeHost.start(queue, 'dead-host')
    onTestFinished(() => fake.close())
    await addJob(queue, fake.id, 'c1')
    await queueEvent(queue, 'completed')
    // Two takes, each with the hello of a link of its own.
    expect(fake.frames.map(({ frame }) => frame.map(({ type }) => type))).toEqual([['hello', 'take'], ['hello', 'take']])
    expect(new Set(fake.frames.map(({ link }) => link)).size).toBe(2)
  })

  it("hosts of other configs get no warm threads of their own on a node: only the first config's first level is kept warm", async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    await my.node(queue, { maxThreads: 2, childrenPerWorker: 1, extra: ['--min-threads', '2'] })
    /** The thread a child of a host with this abortGraceMs (a config of its own) ran on. */
    const threadOf = async (abortGraceMs: number) => {
      const { host: h, parent } = my.host(queue, [whereThenAnswer(Promise.resolve()), whereThenAnswer(Promise.resolve())], { ...PATIENT, abortGraceMs })
      const result = await h.spawn.run({ prompt: 'where?', parent })
      return (JSON.parse(textOf(result.output)) as { threadId: number }).threadId
    }
    await threadOf(1000)
    // Each later config's pool starts the one thread its child needs, no second to keep warm: thread ids come one apart.
    const [b, c, d] = [await threadOf(1001), await threadOf(1002), await threadOf(1003)]
    expect([c - b, d - c]).toEqual([1, 1])
  })

  it("a second host naming a child id another host's child has on the node (its create read off Redis) is refused, and the first host's child runs on", async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const n = await my.node(queue, { extra: ['--host-silence-ms', '60000'] })
    const owner = await fakeHostTaken(queue, onTestFinished)
    await owner.send(n.id, [FAKE_WELCOME, plainCreate('c1')])
    await owner.hears('created c1', (message) => message.type === 'created' && message.child === 'c1')
    const copier = await FakeHost.start(queue, 'copier')
    onTestFinished(() => copier.close())
    await addJob(queue, copier.id, 'c1')
    await copier.hears('take c1', (message) => message.type === 'take' && message.child === 'c1')
    await copier.send(n.id, [FAKE_WELCOME, plainCreate('c1')])
    const refusal = await copier.hears('create-failed c1', (message) => message.type === 'create-failed' && message.child === 'c1')
    expect(refusal.error).toMatchObject({ code: 'ERR_SUBAGENT_DUPLICATE', message: `node ${n.id} already runs a child c1 of another host, so it builds no second one of that id` })
    // The first host's child is whole: published, it asks that host's model.
    await owner.send(n.id, [{ type: 'publish', child: 'c1', prompt: [{ type: 'text', text: 'go' }] }])
    await owner.hears('the model call of c1', (message) => message.type === 'rpc/call' && message.child === 'c1')
    expect(copier.heard.filter((message) => message.child === 'c1').map(({ type }) => type)).toEqual(['take', 'create-failed'])
    await owner.send(n.id, [{ type: 'bye' }])
  })

  it("a node tells its host its room: none while it is full, so a create placed then is refused, naming the node; room again once a child left", async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const n = await my.node(queue, { childrenPerWorker: 1, extra: ['--host-silence-ms', '60000'] })
    const fake = await fakeHostTaken(queue, onTestFinished)
    await fake.send(n.id, [FAKE_WELCOME, plainCreate('c1')])
    await fake.hears('created c1', (message) => message.type === 'created' && message.child === 'c1')
    // One slot, taken by c1: the word on level 1 is none; the deeper levels have theirs.
    await fake.hears('no room', (message) => message.type === 'room' && message.level === 1 && message.free === 0)
    expect(fake.heard.filter(said('room')).map(({ level }) => level)).toEqual([1, 2, 3, 4])
    await fake.send(n.id, [plainCreate('c2')])
    const refusal = await fake.hears('create-failed c2', (message) => message.type === 'create-failed' && message.child === 'c2')
    expect(refusal.error).toMatchObject({ code: 'ERR_SUBAGENT_NODE_FULL', message: `node ${n.id} has no room for the child (it runs as many as it may); it is queued for any node` })
    await fake.send(n.id, [{ type: 'drop', child: 'c1' }])
    // The placement it refused is counted in the word, so a host knows none is still on its way.
    await fake.hears('room again', (message) => message.type === 'room' && message.level === 1 && message.free === 1 && message.placed === 1)
    await fake.send(n.id, [plainCreate('c3')])
    await fake.hears('created c3', (message) => message.type === 'created' && message.child === 'c3')
    await fake.send(n.id, [{ type: 'bye' }])
  })

  it('a job that comes while children placed directly fill a node goes back to the queue for another node; the node takes jobs again once it has room', async ({ expect, onTestFinished }) => {
    const my = scope(onTestFinished)
    const queue = freshQueue()
    const a = await my.node(queue, { childrenPerWorker: 1 })
    const held = gate()
    const heldAnswer: ScriptEntry = async () => (await held.promise, textResponse('held'))
    const { host: h, parent } = my.host(queue, [textResponse('one'), heldAnswer, ...Array.from({ length: 2 }, () => whereThenAnswer(Promise.resolve()))], PATIENT)
    await h.spawn.run({ prompt: 'link up', parent })
    // The node's one slot, taken by a child placed on it directly; its Worker still waits for a job.
    const filling = await h.spawn.start({ prompt: 'hold', parent })
    const queued = h.spawn.start({ prompt: 'where are you?', parent })
    // Added (the second job), taken by the full node, moved back to wait: the third 'waiting'.
    await queueEvent(queue, 'waiting', { nth: 3 })
    const b = await my.node(queue, { childrenPerWorker: 1 })
    const run = await queued
    const result = await run.result
    await run.dispose()
    expect(JSON.parse(textOf(result.output)).pid).toBe(b.process.pid)
    held.open()
    expect(await filling.result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'held' }] })
    await filling.dispose()
    await b.stop()
    // A host the node never spoke to can only queue: the node, with room again, takes its job.
    const { host: other, parent: theirs } = my.host(queue, [textResponse('taken again')], PATIENT)
    expect(await other.spawn.run({ prompt: 'anyone?', parent: theirs })).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'taken again' }] })
    expect(a.process.exitCode).toBeNull()
  })
})
