/**
 * Continuable children (CONTRACT.md §13), on every transport: one session for the child's life,
 * one activation per inbox message, in order, each settling with its own output; an idle child
 * holds no runner, so it survives its runner and continues on another.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  createHost,
  createNdjsonStore,
  defineTool,
  ScriptedModel,
  textResponse,
  toolCallResponse,
  type ContinuableRun,
  type Model,
  type ModelRequest,
  type Settlement,
  type StreamChunk,
} from 'subagent-worker'
import { bullmqTransport } from 'subagent-worker/bullmq'
import { BULLMQ, closeHosts, ownRunnerOptions, setup, TRANSPORTS, type TransportName } from '../support/harness.js'
import { startTestNode, type TestNode } from '../support/nodes.js'

const FAULT_MODULE = fileURLToPath(new URL('../fixtures/fault-module.mjs', import.meta.url))

afterEach(closeHosts)

/** A host model whose every request waits until the test answers it, so a test knows an activation is running. */
class GatedModel implements Model {
  readonly requests: ModelRequest[] = []
  readonly #answers: Array<(chunks: StreamChunk[]) => void> = []
  readonly #arrivals: Array<() => void> = []

  async *stream(request: ModelRequest): AsyncIterable<StreamChunk> {
    const chunks = await new Promise<StreamChunk[]>((resolve, reject) => {
      this.#answers.push(resolve)
      request.signal.addEventListener('abort', () => reject(request.signal.reason), { once: true })
      this.requests.push(request)
      this.#arrivals.splice(0).forEach((wake) => wake())
    })
    yield* chunks
  }

  /** Resolves once `count` requests have arrived. */
  async arrived(count: number): Promise<void> {
    while (this.requests.length < count) await new Promise<void>((resolve) => this.#arrivals.push(resolve))
  }

  /** Answers request `n` (1-based) with `text`. */
  answer(n: number, text: string): void {
    this.#answers[n - 1]!(textResponse(text) as StreamChunk[])
  }
}

/** The next `count` settlements of `run`, in order. */
async function settlementsOf(run: ContinuableRun, count: number): Promise<Settlement[]> {
  const got: Settlement[] = []
  if (count === 0) return got
  for await (const settlement of run.settlements) {
    got.push(settlement)
    if (got.length === count) break
  }
  return got
}

/** The texts of a model request's user messages, in order. */
function userTexts(request: ModelRequest): string[] {
  return (request.messages as Array<{ role: string; content: unknown }>)
    .filter((message) => message.role === 'user')
    .map((message) => (typeof message.content === 'string' ? message.content : (message.content as Array<{ text?: string }>).map((block) => block.text ?? '').join('')))
}

function text(value: string) {
  return [{ type: 'text', text: value }]
}

describe.each(TRANSPORTS)('continuable children [%s]', (transport) => {
  it('start returns before the work is done; the settlement comes when the activation ends', async () => {
    const { host, parent } = setup(transport)
    const model = new GatedModel()
    host.models.register('gated', model)
    const run = await host.spawn.startContinuable({ prompt: 'first task', parent, agentOptions: { provider: 'gated' } })
    expect(host.agents.get(run.id)).toBeDefined()
    await model.arrived(1)
    model.answer(1, 'done with the first')
    const [settlement] = await settlementsOf(run, 1)
    expect(settlement).toEqual({ runId: run.id, id: run.id, parentId: parent.id, activation: 1, stopReason: 'completed', output: text('done with the first'), lastAssistantMessage: 'done with the first', usage: { inputTokens: 0, outputTokens: 5 } })
    await run.dispose()
  })

  it('three messages: three activations in order, one session, each settlement with only its own output', async () => {
    const { host, parent, model } = setup(transport, [textResponse('one'), textResponse('two'), textResponse('three')])
    const heard: Settlement[] = []
    host.on('subagent/settled', (s) => void heard.push(s))
    const run = await host.spawn.startContinuable({ prompt: 'a', parent, agentOptions: { provider: 'scripted' }, label: 'worker-bee' })
    run.send('b')
    run.send([{ type: 'text', text: 'c' }])
    const settlements = await settlementsOf(run, 3)
    expect(settlements.map(({ activation, stopReason, output, lastAssistantMessage }) => ({ activation, stopReason, output, lastAssistantMessage }))).toEqual([
      { activation: 1, stopReason: 'completed', output: text('one'), lastAssistantMessage: 'one' },
      { activation: 2, stopReason: 'completed', output: text('two'), lastAssistantMessage: 'two' },
      { activation: 3, stopReason: 'completed', output: text('three'), lastAssistantMessage: 'three' },
    ])
    expect(heard).toEqual(settlements)
    // One session: each activation saw the history before it.
    expect(model.requests.map(userTexts)).toEqual([['a'], ['a', 'b'], ['a', 'b', 'c']])
    const events = host.agents.get(run.id)!.session.events
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i))
    expect(events.filter((e) => e.type === 'turn/start')).toHaveLength(3)
    expect(events.filter((e) => e.type === 'subagent/descriptor').map((e) => e.data)).toEqual([{ mode: 'continuable', provider: 'spawn', label: 'worker-bee' }])
    await run.dispose()
    expect(host.agents.get(run.id)).toBeUndefined()
  })

  it('messages sent while an activation runs queue behind it', async () => {
    const { host, parent } = setup(transport)
    const model = new GatedModel()
    host.models.register('gated', model)
    const run = await host.spawn.startContinuable({ prompt: 'first', parent, agentOptions: { provider: 'gated' } })
    await model.arrived(1)
    run.send('second')
    run.send('third')
    model.answer(1, 'answer one')
    await model.arrived(2)
    expect(userTexts(model.requests[1]!)).toEqual(['first', 'second'])
    model.answer(2, 'answer two')
    await model.arrived(3)
    expect(userTexts(model.requests[2]!)).toEqual(['first', 'second', 'third'])
    model.answer(3, 'answer three')
    const settlements = await settlementsOf(run, 3)
    expect(settlements.map((s) => [s.activation, s.lastAssistantMessage])).toEqual([
      [1, 'answer one'],
      [2, 'answer two'],
      [3, 'answer three'],
    ])
    await run.dispose()
  })

  it('depth holds across activations: a later activation delegates from its own depth', async () => {
    const { host, parent } = setup(transport, [
      textResponse('first'),
      toolCallResponse('d1', 'delegate', { maxDepth: 1 }),
      textResponse('refused'),
      toolCallResponse('d2', 'delegate', { maxDepth: 2 }),
      textResponse('grandchild answer'),
      textResponse('delegated'),
    ])
    host.tools.register(
      defineTool({
        name: 'delegate',
        description: 'Starts a one-shot child of the calling agent.',
        parameters: { type: 'object', properties: { maxDepth: { type: 'integer' } }, required: ['maxDepth'] },
        async execute({ maxDepth }, exec) {
          const result = await host.spawn.run({ prompt: 'deeper', parent: exec.agent, maxDepth, agentOptions: { provider: 'scripted' } })
          return { depth: host.agents.get(exec.agent.id)!.session.header.delegationDepth, output: result.output }
        },
      }),
    )
    const run = await host.spawn.startContinuable({ prompt: 'one', parent, agentOptions: { provider: 'scripted' } })
    run.send('two')
    run.send('three')
    await settlementsOf(run, 3)
    const results = host.agents.get(run.id)!.session.events.filter((e) => e.type === 'tool/result').map((e) => e.data as { isError: boolean; content: unknown })
    expect(results).toEqual([
      expect.objectContaining({ isError: true, content: text('tool "delegate" failed: subagent depth 2 exceeds maxDepth 1') }),
      expect.objectContaining({ isError: false, value: { depth: 1, output: text('grandchild answer') } }),
    ])
    await run.dispose()
  })

  it('dispose during an activation settles it aborted, ends the settlements and removes the child', async () => {
    const { host, parent } = setup(transport)
    const model = new GatedModel()
    host.models.register('gated', model)
    const run = await host.spawn.startContinuable({ prompt: 'long task', parent, agentOptions: { provider: 'gated' } })
    await model.arrived(1)
    run.send('queued, never run')
    const all = (async () => {
      const got: Settlement[] = []
      for await (const s of run.settlements) got.push(s)
      return got
    })()
    await run.dispose()
    const settlements = await all
    expect(settlements.map((s) => [s.activation, s.stopReason])).toEqual([[1, 'aborted']])
    expect(host.agents.get(run.id)).toBeUndefined()
    expect(model.requests).toHaveLength(1)
  })

  it('send after dispose throws, with a code', async () => {
    const { host, parent } = setup(transport, [textResponse('only')])
    const run = await host.spawn.startContinuable({ prompt: 'x', parent, agentOptions: { provider: 'scripted' } })
    await settlementsOf(run, 1)
    await run.dispose()
    expect(() => run.send('more')).toThrow(expect.objectContaining({ code: 'ERR_SUBAGENT_DISPOSED', message: `subagent ${run.id} was disposed: start another continuable child to send it work` }))
    await run.dispose() // idempotent
  })

  it.each([
    ['a plain abort()', undefined, { kind: 'parent' }],
    ["the caller's own reason", { kind: 'mine', note: 'kept' }, { kind: 'mine', note: 'kept' }],
  ])("the request's signal, aborted with %s, disposes the child: its running activation is cancelled with the reason a one-shot child's would be (§7)", async (_name, given, recorded) => {
    const { host, parent, model } = setup(transport, ['hang'])
    const turnEnds: unknown[] = []
    host.on('subagent/event', ({ event }) => void (event.type === 'turn/end' && turnEnds.push(event.data.reason)))
    const controller = new AbortController()
    const run = await host.spawn.startContinuable({ prompt: 'a', parent, agentOptions: { provider: 'scripted' }, signal: controller.signal })
    await model.requested(1)
    controller.abort(given)
    const [settled] = await settlementsOf(run, 1)
    expect(settled).toMatchObject({ activation: 1, stopReason: 'aborted' })
    expect(turnEnds).toEqual([{ kind: 'aborted', reason: recorded }])
    expect(model.requests[0]!.signal.reason).toEqual(recorded)
    expect(() => run.send('b')).toThrow(expect.objectContaining({ code: 'ERR_SUBAGENT_DISPOSED' }))
  })

  it('an outputSchema is refused: each activation ends in text', async () => {
    const { host, parent } = setup(transport)
    const request = { prompt: 'x', parent, outputSchema: { type: 'object', properties: {} } } as unknown as Parameters<typeof host.spawn.startContinuable>[0]
    await expect(host.spawn.startContinuable(request)).rejects.toMatchObject({ code: 'ERR_SUBAGENT_CONTINUABLE' })
    expect(host.agents.list()).toEqual([parent])
  })

  it('limits: maxSteps counts per activation, maxTotalTokens over the life', async () => {
    const usage = (n: number) => [{ type: 'text-delta', text: `spent ${n}` }, { type: 'usage', inputTokens: n, outputTokens: 0 }, { type: 'finish', reason: 'stop' }] as StreamChunk[]
    const { host, parent, model } = setup(transport, [usage(4), usage(5), usage(6)])
    const run = await host.spawn.startContinuable({ prompt: 'a', parent, agentOptions: { provider: 'scripted' }, limits: { maxSteps: 1, maxTotalTokens: 9 } })
    run.send('b')
    run.send('c')
    const [first, second, third] = await settlementsOf(run, 3)
    expect(first).toMatchObject({ stopReason: 'completed', usage: { inputTokens: 4, outputTokens: 0 } })
    // The second activation's one step was allowed (maxSteps: 1 is per activation) and reached the
    // life's budget (how that step's own turn ends depends on when the host's count stops it).
    expect(second!.activation).toBe(2)
    expect(model.requests).toHaveLength(2)
    // The third is refused before any model request: the token budget is the child's life's.
    expect(third).toEqual({ runId: run.id, id: run.id, parentId: parent.id, activation: 3, stopReason: 'aborted', output: [], diagnostic: 'the child exceeded limits.maxTotalTokens (9 tokens)' })
    await run.dispose()
  })

  it("its end reports its life's usage: every activation's own usage summed, and totalUsage with it (§12)", async () => {
    const spent = (text: string, inputTokens: number, outputTokens: number) => [{ type: 'text-delta', text }, { type: 'usage', inputTokens, outputTokens }, { type: 'finish', reason: 'stop' }] as StreamChunk[]
    const { host, parent } = setup(transport, [spent('one', 1, 2), spent('two', 10, 20)])
    const ends: unknown[] = []
    host.on('subagent/end', (end) => ends.push(end))
    const run = await host.spawn.startContinuable({ prompt: 'a', parent, agentOptions: { provider: 'scripted' } })
    run.send('b')
    const settled = await settlementsOf(run, 2)
    expect(settled.map((settlement) => settlement.usage)).toEqual([{ inputTokens: 1, outputTokens: 2 }, { inputTokens: 10, outputTokens: 20 }])
    await run.dispose()
    expect(ends).toMatchObject([{ stopReason: 'completed', usage: { inputTokens: 11, outputTokens: 22 }, totalUsage: { inputTokens: 11, outputTokens: 22 } }])
  })

  it('limits: timeoutMs counts per activation', async () => {
    const { host, parent, model } = setup(transport, ['hang', textResponse('in time')])
    const run = await host.spawn.startContinuable({ prompt: 'a', parent, agentOptions: { provider: 'scripted' }, limits: { timeoutMs: 1000 } })
    const [late] = await settlementsOf(run, 1)
    expect(late).toMatchObject({ activation: 1, stopReason: 'aborted', diagnostic: 'the child exceeded limits.timeoutMs (1000 ms)' })
    run.send('b')
    const [, second] = await settlementsOf(run, 2)
    expect(second).toMatchObject({ activation: 2, stopReason: 'completed', output: text('in time') })
    expect(model.requests).toHaveLength(2)
    await run.dispose()
  })

  it('limits: tokens its step streamed before its deadline stopped the activation stay spent: the next activation is refused', async () => {
    // The step reaches the life's budget and then waits: the activation's deadline stops it. The
    // deadline is the scenario, not a wait: long enough that a loaded machine makes the request
    // before it (as the 3 s of the parent's deadline below).
    const { host, parent, model } = setup(transport, [{ hangAfter: [{ type: 'usage', inputTokens: 60, outputTokens: 40 }] }, textResponse('never')])
    const run = await host.spawn.startContinuable({ prompt: 'a', parent, agentOptions: { provider: 'scripted' }, limits: { timeoutMs: 3000, maxTotalTokens: 100 } })
    const [late] = await settlementsOf(run, 1)
    expect(late).toMatchObject({ activation: 1, stopReason: 'aborted', diagnostic: 'the child exceeded limits.timeoutMs (3000 ms)' })
    run.send('b')
    const [, second] = await settlementsOf(run, 2)
    // The deadline was the activation's; the tokens are the life's.
    expect(second).toMatchObject({ activation: 2, stopReason: 'aborted', output: [], diagnostic: 'the child exceeded limits.maxTotalTokens (100 tokens)' })
    expect(model.requests).toHaveLength(1)
    await run.dispose()
  })

  it("limits: a parent's activation that runs out of time refuses its continuable child nothing after it", async () => {
    const { host, parent } = setup(transport, ['hang'])
    host.models.register('g', new ScriptedModel([textResponse('g one'), textResponse('g two')]))
    const c = await host.spawn.startContinuable({ prompt: 'c one', parent, agentOptions: { provider: 'scripted' }, limits: { timeoutMs: 3000 } })
    // C's child, started while C's first activation runs: it has what C has left of its 3 s.
    const g = await host.spawn.startContinuable({ prompt: 'g one', parent: host.agents.get(c.id)!, agentOptions: { provider: 'g' } })
    const [late] = await settlementsOf(c, 1)
    expect(late).toMatchObject({ activation: 1, stopReason: 'aborted', diagnostic: 'the child exceeded limits.timeoutMs (3000 ms)' })
    // C's deadline was its activation's: once it is over, its child's next activation runs (its first may have been stopped with C's).
    g.send('g two')
    const [, second] = await settlementsOf(g, 2)
    expect(second).toMatchObject({ activation: 2, stopReason: 'completed' })
    await g.dispose()
    await c.dispose()
  })

  it('fork: the child starts from the parent’s completed turns and keeps them across activations', async () => {
    const { host, parent, model } = setup(transport, [textResponse('parent turn'), textResponse('forked one'), textResponse('forked two')])
    await parent.run('parent question')
    const run = await host.fork.startContinuable({ prompt: 'child task', parent })
    run.send('child follow-up')
    const settlements = await settlementsOf(run, 2)
    expect(settlements.map((s) => s.lastAssistantMessage)).toEqual(['forked one', 'forked two'])
    expect(userTexts(model.requests[2]!)).toEqual(['parent question', 'child task', 'child follow-up'])
    await run.dispose()
  })

  it('a host restart with an ndjson store: resumeAgent gives the child back, and it takes more work', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sw-continuable-'))
    try {
      const first = setup(transport, [textResponse('before the restart')], { store: createNdjsonStore(dir) })
      const run = await first.host.spawn.startContinuable({ prompt: 'remember 42', parent: first.parent, agentOptions: { provider: 'scripted' } })
      await settlementsOf(run, 1)
      await first.host.close()

      const second = setup(transport, [textResponse('after the restart')], { store: createNdjsonStore(dir) })
      const resumed = await second.host.resumeAgent(run.id)
      expect(resumed.session.header).toMatchObject({ id: run.id, origin: 'subagent', delegationDepth: 1, parentSession: first.parent.id })
      const outcome = await resumed.run('what did I ask you to remember?')
      expect(outcome).toEqual({ output: text('after the restart'), stopReason: 'completed', usage: { inputTokens: 0, outputTokens: 5 } })
      expect(userTexts(second.model.requests[0]!)).toEqual(['remember 42', 'what did I ask you to remember?'])
      await second.host.close()
      const stored = await createNdjsonStore(dir).read(run.id)
      expect(stored!.events.filter((e) => e.type === 'turn/end')).toHaveLength(2)
      expect(stored!.events.map((e) => e.seq)).toEqual(stored!.events.map((_, i) => i))
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it('resumed after a restart, its deadline still counts per turn: a turn that ran out of time leaves the next its own', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sw-continuable-'))
    try {
      const first = setup(transport, [textResponse('before the restart')], { store: createNdjsonStore(dir) })
      const run = await first.host.spawn.startContinuable({ prompt: 'a', parent: first.parent, agentOptions: { provider: 'scripted' }, limits: { timeoutMs: 1000 } })
      await settlementsOf(run, 1)
      await first.host.close()

      const second = setup(transport, ['hang', textResponse('in time')], { store: createNdjsonStore(dir) })
      const resumed = await second.host.resumeAgent(run.id)
      expect(await resumed.run('b')).toMatchObject({ stopReason: 'aborted' })
      expect(resumed.session.events.filter((e) => e.type === 'turn/end').at(-1)!.data).toEqual({ reason: { kind: 'aborted', reason: { kind: 'limit', limit: 'timeoutMs', value: 1000 } } })
      expect(await resumed.run('c')).toMatchObject({ stopReason: 'completed', output: text('in time') })
      await second.host.close()
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  if (transport === 'inline') return

  it('the runner dying during an activation settles it error; the child takes more work', async ({ onTestFinished }) => {
    // setup() selects the transport itself, but on bullmq the runner is a node of the test's own.
    const { isolation: _isolation, ...own } = await ownRunnerOptions(transport, [FAULT_MODULE], onTestFinished)
    const { host, parent } = setup(transport, [toolCallResponse('x', 'exit', { code: 3 }), textResponse('still here')], { ...own, agentModule: FAULT_MODULE })
    const run = await host.spawn.startContinuable({ prompt: 'crash', parent, agentOptions: { provider: 'scripted' } })
    const [crashed] = await settlementsOf(run, 1)
    expect(crashed).toMatchObject({ activation: 1, stopReason: 'error' })
    expect(crashed!.diagnostic).toMatch(/exit/)
    run.send('again')
    const [after] = await settlementsOf(run, 2).then((all) => all.slice(1))
    expect(after).toMatchObject({ activation: 2, stopReason: 'completed', output: text('still here') })
    const events = host.agents.get(run.id)!.session.events
    expect(events.filter((e) => e.type === 'turn/end').map((e) => (e.data as { reason: { kind: string } }).reason.kind)).toEqual(['error', 'completed'])
    await run.dispose()
  })
})

/** Where a child's `where` tool ran: the thread and process of its runner. */
function whereOf(events: ReadonlyArray<{ type: string; data: unknown }>): Array<{ threadId: number; pid: number }> {
  return events.filter((e) => e.type === 'tool/result').map((e) => (e.data as { value: { threadId: number; pid: number } }).value)
}

describe.each(['worker', 'process'] as const)('an idle continuable child survives its runner [%s]', (transport: TransportName) => {
  it('idle on one runner, its runner dies, continued on another with its history', async () => {
    const script = [toolCallResponse('w1', 'where', {}), textResponse('at one'), toolCallResponse('k', 'exit', { code: 3 }), toolCallResponse('w2', 'where', {}), textResponse('at two')]
    const { host, parent, model } = setup(transport, script, { agentModule: FAULT_MODULE, pool: { minThreads: 1, maxThreads: 1 } })
    const run = await host.spawn.startContinuable({ prompt: 'where are you?', parent, agentOptions: { provider: 'scripted' } })
    await settlementsOf(run, 1)
    // The only runner dies while the child is idle: a one-shot child on it calls process.exit.
    const killer = await host.spawn.run({ prompt: 'exit', parent, agentOptions: { provider: 'scripted' } })
    expect(killer.stopReason).toBe('error')
    run.send('and now?')
    const [second] = await settlementsOf(run, 2).then((all) => all.slice(1))
    expect(second).toMatchObject({ activation: 2, stopReason: 'completed', output: text('at two') })
    const [one, two] = whereOf(host.agents.get(run.id)!.session.events)
    expect(transport === 'worker' ? one!.threadId !== two!.threadId : one!.pid !== two!.pid).toBe(true)
    expect(userTexts(model.requests[3]!)).toEqual(['where are you?', 'and now?'])
    await run.dispose()
  })
})

describe.skipIf(!BULLMQ)('an idle continuable child survives its node [bullmq]', () => {
  let nodes: TestNode[] = []
  let queue: string
  beforeEach(async () => {
    queue = `continuable-${process.pid}-${Math.random().toString(36).slice(2, 8)}`
    nodes = await Promise.all([startTestNode({ redis: BULLMQ!.redis, queue, maxThreads: 1 }), startTestNode({ redis: BULLMQ!.redis, queue, maxThreads: 1 })])
  })
  afterEach(async () => {
    await Promise.all(nodes.map((node) => node.stop()))
  })

  it('idle on one node, that node stopped, continued on the other with its history', async () => {
    const host = createHost({ transport: bullmqTransport({ connection: BULLMQ!.redis, queue }), agentModule: FAULT_MODULE })
    try {
      const model = new ScriptedModel([toolCallResponse('w1', 'where', {}), textResponse('at one'), toolCallResponse('w2', 'where', {}), textResponse('at two')])
      host.models.register('scripted', model)
      const parent = host.createAgent({ options: { provider: 'scripted' } })
      const run = await host.spawn.startContinuable({ prompt: 'where are you?', parent })
      await settlementsOf(run, 1)
      const [first] = whereOf(host.agents.get(run.id)!.session.events)
      const node = nodes.find((n) => n.process.pid === first!.pid)!
      await node.stop()
      run.send('and now?')
      const [second] = await settlementsOf(run, 2).then((all) => all.slice(1))
      expect(second).toMatchObject({ activation: 2, stopReason: 'completed', output: text('at two') })
      const [, two] = whereOf(host.agents.get(run.id)!.session.events)
      expect(two!.pid).not.toBe(first!.pid)
      expect(userTexts(model.requests[2]!)).toEqual(['where are you?', 'and now?'])
      await run.dispose()
    } finally {
      await host.close()
    }
  })
})

