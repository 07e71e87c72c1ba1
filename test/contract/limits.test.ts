/**
 * CONTRACT.md §11, limits, on every transport: a deadline, a step bound and a token budget that
 * the host enforces, inherited and never widened, kept by a resumed child, and never early.
 */
import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import {
  createHost,
  createJobTools,
  createMemoryStore,
  createNdjsonStore,
  createSubagentTool,
  defineTool,
  InvalidOptionError,
  ScriptedModel,
  textOf,
  textResponse,
  type ContentBlock,
  type ModelRequest,
  type ScriptEntry,
  type StreamChunk,
} from 'subagent-worker'
import { closeHosts, ownRunnerOptions, setup, TRANSPORTS, type Fixture } from '../support/harness.js'
import { recordLifecycle } from '../support/driver-helpers.js'
import { gatedTool, lastTurnEnd, toolResults } from '../support/loop-helpers.js'

afterEach(closeHosts)

const FAULT_MODULE = fileURLToPath(new URL('../fixtures/fault-module.mjs', import.meta.url))

/** One step calling `noop`, reporting `tokens` (half input, half output). */
const callStep = (id: string, tokens = 2, name = 'noop', args: object = {}): StreamChunk[] => [
  { type: 'tool-call', id, name, arguments: JSON.stringify(args) },
  { type: 'usage', inputTokens: tokens / 2, outputTokens: tokens / 2 },
  { type: 'finish', reason: 'tool-calls' },
]
const textStep = (text: string, tokens = 2): StreamChunk[] => [
  { type: 'text-delta', text },
  { type: 'usage', inputTokens: tokens / 2, outputTokens: tokens / 2 },
  { type: 'finish', reason: 'stop' },
]
const limitEnd = (limit: string, value: number) => ({ kind: 'aborted', reason: { kind: 'limit', limit, value } })
const noop = defineTool({ name: 'noop', description: 'does nothing', parameters: { type: 'object' }, execute: () => 'ok' })

function withNoop(fixture: Fixture): Fixture {
  fixture.host.tools.register(noop)
  return fixture
}

describe.each(TRANSPORTS)('§11 limits [%s]', (transport) => {
  it('timeoutMs: a child awaiting its host model is cancelled with the limit reason; no grace is needed', async () => {
    const fixture = setup(transport, ['hang'])
    const run = await fixture.host.spawn.start({ prompt: 'wait', parent: fixture.parent, limits: { timeoutMs: 300 } })
    const result = await run.result
    expect(result).toMatchObject({ stopReason: 'aborted', diagnostic: 'the child exceeded limits.timeoutMs (300 ms)' })
    const events = fixture.host.agents.get(run.id)!.session.events
    expect(lastTurnEnd(events)).toEqual(limitEnd('timeoutMs', 300))
    expect(fixture.host.agents.get(run.id)!.session.header.limits).toEqual({ timeoutMs: 300 })
    await run.dispose()
  })

  it.skipIf(transport === 'inline')('timeoutMs: a child spinning in a module tool is stopped after abortGraceMs, with the limit reason', async () => {
    const fixture = setup(transport, [callStep('c1', 2, 'spin')], { agentModule: FAULT_MODULE, abortGraceMs: 200 })
    const run = await fixture.host.spawn.start({ prompt: 'spin', parent: fixture.parent, limits: { timeoutMs: 1500 } })
    const result = await run.result
    expect(result).toMatchObject({ stopReason: 'aborted', diagnostic: 'the child exceeded limits.timeoutMs (1500 ms)' })
    const events = fixture.host.agents.get(run.id)!.session.events
    // The call was made and never answered: the tool was spinning when the deadline passed.
    expect(result.output).toContainEqual({ type: 'tool-call', id: 'c1', name: 'spin', arguments: '{}' })
    expect(toolResults(events)).toEqual([])
    expect(lastTurnEnd(events)).toEqual(limitEnd('timeoutMs', 1500))
    await run.dispose()
  })

  it('maxSteps: the request beyond the bound is not made; the turn ends aborted with the limit reason', async () => {
    const fixture = withNoop(setup(transport, [callStep('c1'), callStep('c2'), callStep('c3'), textStep('never')]))
    const run = await fixture.host.spawn.start({ prompt: 'loop', parent: fixture.parent, limits: { maxSteps: 2 } })
    const result = await run.result
    expect(result).toMatchObject({ stopReason: 'aborted', diagnostic: 'the child exceeded limits.maxSteps (2 steps)' })
    expect(fixture.model.requests).toHaveLength(2)
    const events = fixture.host.agents.get(run.id)!.session.events
    expect(toolResults(events).map((r) => r.callId)).toEqual(['c1', 'c2'])
    expect(lastTurnEnd(events)).toEqual(limitEnd('maxSteps', 2))
    await run.dispose()
  })

  it('maxTotalTokens: once the total reaches it no further request is made; the turn ends aborted with the limit reason', async () => {
    const fixture = withNoop(setup(transport, [callStep('c1', 20), callStep('c2', 20), callStep('c3', 20), textStep('never')]))
    const run = await fixture.host.spawn.start({ prompt: 'spend', parent: fixture.parent, limits: { maxTotalTokens: 50 } })
    const result = await run.result
    expect(result).toMatchObject({ stopReason: 'aborted', diagnostic: 'the child exceeded limits.maxTotalTokens (50 tokens)' })
    expect(fixture.model.requests).toHaveLength(3)
    expect(lastTurnEnd(fixture.host.agents.get(run.id)!.session.events)).toEqual(limitEnd('maxTotalTokens', 50))
    await run.dispose()
  })

  it('a step that reaches the token budget and ends the turn completes it; one with calls ends it aborted, its message kept', async () => {
    const finishing = withNoop(setup(transport, [callStep('c1', 10), textStep('fin', 10)]))
    const done = await finishing.host.spawn.run({ prompt: 'finish', parent: finishing.parent, limits: { maxTotalTokens: 20 } })
    expect(done).toEqual({ stopReason: 'completed', output: [{ type: 'text', text: 'fin' }], usage: { inputTokens: 10, outputTokens: 10 }, totalUsage: { inputTokens: 10, outputTokens: 10 } })

    const calling = withNoop(setup(transport, [callStep('c1', 10), callStep('c2', 10), textStep('never')]))
    const run = await calling.host.spawn.start({ prompt: 'spend', parent: calling.parent, limits: { maxTotalTokens: 20 } })
    expect(await run.result).toMatchObject({ stopReason: 'aborted', diagnostic: 'the child exceeded limits.maxTotalTokens (20 tokens)', usage: { inputTokens: 10, outputTokens: 10 } })
    expect(calling.model.requests).toHaveLength(2)
    const events = calling.host.agents.get(run.id)!.session.events
    expect(events.filter((e) => e.type === 'assistant/message')).toHaveLength(2)
    expect(lastTurnEnd(events)).toEqual(limitEnd('maxTotalTokens', 20))
    await run.dispose()
  })

  it('a host tool its step called when that step spent the budget does not run, on every transport: the turn ends aborted first', async () => {
    const fixture = setup(transport, [callStep('h1', 10, 'counted')])
    let runs = 0
    fixture.host.tools.register(defineTool({ name: 'counted', description: 'counts its runs', parameters: { type: 'object' }, execute: () => (runs++, 'ran') }))
    const result = await fixture.host.spawn.run({ prompt: 'spend', parent: fixture.parent, limits: { maxTotalTokens: 10 } })
    expect(result).toMatchObject({ stopReason: 'aborted', diagnostic: 'the child exceeded limits.maxTotalTokens (10 tokens)' })
    expect(runs).toBe(0)
  })

  // A host model's step comes with the host's verdict; a module model's the host learns of from its record, and its runner waits for the host's word.
  it.for(['host', 'module'] as const)('a module tool its step called when that step spent the budget does not run either: the step ends the turn, on every transport (a %s model)', async (model, { onTestFinished }) => {
    const dir = await mkdtemp(join(tmpdir(), 'sw-limits-'))
    onTestFinished(() => rm(dir, { recursive: true, force: true }))
    const file = join(dir, 'runs')
    const fixture = setup(transport, [callStep('t1', 10, 'tally', { file, tag: 'ran' })], { agentModule: FAULT_MODULE })
    const request =
      model === 'host'
        ? { prompt: 'spend' }
        : { prompt: JSON.stringify([{ id: 't1', tool: 'tally', args: { file, tag: 'ran' }, tokens: 10 }]), agentOptions: { provider: 'planned' } }
    const run = await fixture.host.spawn.start({ ...request, parent: fixture.parent, limits: { maxTotalTokens: 10 } })
    expect(await run.result).toMatchObject({ stopReason: 'aborted', diagnostic: 'the child exceeded limits.maxTotalTokens (10 tokens)' })
    const events = fixture.host.agents.get(run.id)!.session.events
    expect(toolResults(events)).toEqual([{ callId: 't1', name: 'tally', isError: true, code: 'ABORTED', content: [{ type: 'text', text: 'the tool call was cancelled' }] }])
    expect(lastTurnEnd(events)).toEqual(limitEnd('maxTotalTokens', 10))
    expect(existsSync(file)).toBe(false)
    await run.dispose()
  })

  it('a module tool its module model called when that step spent a budget above the child, spent by another after the child started, does not run', async ({ onTestFinished }) => {
    const dir = await mkdtemp(join(tmpdir(), 'sw-limits-'))
    onTestFinished(() => rm(dir, { recursive: true, force: true }))
    const file = join(dir, 'runs')
    const gated = gatedTool()
    const fixture = setup(transport, [textStep('spent most', 90)], { agentModule: FAULT_MODULE })
    fixture.host.tools.register(gated.tool)
    const top = fixture.host.createAgent({ options: { provider: 'scripted' }, limits: { maxTotalTokens: 100 } })
    // The child starts with the whole budget left: its runner cannot know what its parent spends next.
    const plan = [
      { id: 'g1', tool: 'gated', args: { tag: 'wait' }, tokens: 2 },
      { id: 't1', tool: 'tally', args: { file, tag: 'ran' }, tokens: 10 },
    ]
    const run = await fixture.host.spawn.start({ prompt: JSON.stringify(plan), parent: top, agentOptions: { provider: 'planned' } })
    expect(fixture.host.agents.get(run.id)!.session.header.limits).toEqual({ maxTotalTokens: 100 })
    await gated.until('the child waits in its host tool', (state) => state.started.length === 1)
    expect(await top.run('spend')).toMatchObject({ stopReason: 'completed' })
    gated.release('wait')
    // 90 + 2 + 10: the child's second step reaches its parent's budget.
    expect(await run.result).toMatchObject({ stopReason: 'aborted', diagnostic: 'the child exceeded limits.maxTotalTokens (100 tokens)' })
    const events = fixture.host.agents.get(run.id)!.session.events
    expect(toolResults(events)).toMatchObject([
      { callId: 'g1', isError: false },
      { callId: 't1', isError: true, code: 'ABORTED' },
    ])
    expect(existsSync(file)).toBe(false)
    await run.dispose()
  })

  it('a child finishing just under each limit is not stopped', async () => {
    const fixture = withNoop(setup(transport, [callStep('c1', 20), callStep('c2', 20), textStep('done', 20)]))
    const limits = { timeoutMs: 60_000, maxSteps: 3, maxTotalTokens: 61 }
    const result = await fixture.host.spawn.run({ prompt: 'finish', parent: fixture.parent, limits })
    expect(result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'done' }] })
    expect(result.diagnostic).toBeUndefined()
  })

  it("inherited, never widened: the host's default and what the parent has left narrow the request", async () => {
    const fixture = setup(transport, [textStep('parent turn', 30), textStep('child done')], { limits: { maxSteps: 5, timeoutMs: 60_000 } })
    const parent = fixture.host.createAgent({ options: { provider: 'scripted' }, limits: { maxTotalTokens: 100 } })
    await parent.run('spend some')
    const run = await fixture.host.spawn.start({ prompt: 'go', parent, limits: { maxSteps: 10, maxTotalTokens: 1000, timeoutMs: 30_000 } })
    const { limits } = fixture.host.agents.get(run.id)!.session.header
    expect(limits).toEqual({ maxSteps: 5, maxTotalTokens: 70, timeoutMs: 30_000 })
    await run.result
    await run.dispose()
  })

  it("a parent not live on this host (a stored session as a view) passes on what its header's limits have left, its tree's recorded spending taken off", async () => {
    const script = [callStep('d1', 10, 'subagent', { description: 'grandchild', prompt: 'spend' }), textStep('g done', 40), textStep('a done', 0), textStep('b done', 0)]
    const store = createMemoryStore()
    const fixture = setup(transport, script, { store })
    fixture.host.tools.register(createSubagentTool(fixture.host, { provider: 'spawn', enableRunInBackground: false }))
    const first = await fixture.host.spawn.start({ prompt: 'delegate', parent: fixture.parent, limits: { maxSteps: 3, maxTotalTokens: 100 } })
    expect(await first.result).toMatchObject({ stopReason: 'completed' })
    await first.dispose()
    const view = { id: first.id, options: { provider: 'scripted' }, session: (await store.read(first.id))! }
    const run = await fixture.host.spawn.start({ prompt: 'go', parent: view, limits: { maxTotalTokens: 1000 } })
    // 10 of its own and 40 of its child's recorded: 50 are left.
    expect(fixture.host.agents.get(run.id)!.session.header.limits).toEqual({ maxSteps: 3, maxTotalTokens: 50 })
    expect(await run.result).toMatchObject({ stopReason: 'completed' })
    await run.dispose()
  })

  it('a child of a view whose tree spent its whole budget makes no request; malformed stored limits are refused before anything is published', async () => {
    const store = createMemoryStore()
    const fixture = setup(transport, [textStep('spent it', 30), textStep('never')], { store })
    const first = await fixture.host.spawn.start({ prompt: 'spend', parent: fixture.parent, limits: { maxTotalTokens: 30 } })
    expect(await first.result).toMatchObject({ stopReason: 'completed' })
    await first.dispose()
    const session = (await store.read(first.id))!
    const run = await fixture.host.spawn.start({ prompt: 'go', parent: { id: first.id, options: { provider: 'scripted' }, session } })
    expect(await run.result).toEqual({ output: [], stopReason: 'aborted', diagnostic: 'the child exceeded limits.maxTotalTokens (30 tokens)' })
    expect(fixture.model.requests).toHaveLength(1)
    await run.dispose()

    const lifecycle = recordLifecycle(fixture.host)
    const malformed = { id: 'elsewhere', options: { provider: 'scripted' }, session: { header: { ...session.header, id: 'elsewhere', limits: { maxSteps: 0 } }, events: [] } }
    await expect(fixture.host.spawn.start({ prompt: 'go', parent: malformed })).rejects.toMatchObject({
      code: 'ERR_SUBAGENT_HEADER',
      message: expect.stringMatching(/^session header limits are malformed: .*limits\.maxSteps/),
    })
    expect(lifecycle.starts).toEqual([])
  })

  // Inline builds a child at once; elsewhere the child below waits for the one runner slot, taken by a blocker.
  it.skipIf(transport === 'inline')("a deadline its parent reaches while the child waits to be built stops the child before it runs, even on a module model the host never meters", async ({ onTestFinished }) => {
    const runner = await ownRunnerOptions(transport, [FAULT_MODULE], onTestFinished)
    const fixture = setup(transport, ['hang', 'hang'], { ...runner, agentModule: FAULT_MODULE, pool: { minThreads: 1, maxThreads: 1, childrenPerWorker: 1 } })
    const blocker = await fixture.host.spawn.start({ prompt: 'hold the slot', parent: fixture.parent })
    await fixture.model.requested(1)
    const parent = fixture.host.createAgent({ options: { provider: 'scripted' }, limits: { timeoutMs: 3000 } })
    const parentTurn = parent.run('wait out the deadline')
    await fixture.model.requested(2)
    // Its limits are worked out now, with time left; then it waits for the slot.
    const starting = fixture.host.spawn.start({ prompt: 'go', parent, agentOptions: { provider: 'module-echo' } })
    expect(await parentTurn).toMatchObject({ stopReason: 'aborted' })
    await blocker.dispose()
    const run = await starting
    expect(await run.result).toEqual({ output: [], stopReason: 'aborted', diagnostic: 'the child exceeded limits.timeoutMs (3000 ms)' })
    // The module model was never asked: no step of the child was recorded.
    expect(fixture.host.agents.get(run.id)!.session.events.filter((event) => event.type === 'assistant/message')).toEqual([])
    await run.dispose()
  })

  it.skipIf(transport === 'inline')("a child's own deadline runs from its publication: the time it waited to be built does not count", async ({ onTestFinished }) => {
    const runner = await ownRunnerOptions(transport, [FAULT_MODULE], onTestFinished)
    const fixture = setup(transport, ['hang', 'hang'], { ...runner, agentModule: FAULT_MODULE, pool: { minThreads: 1, maxThreads: 1, childrenPerWorker: 1 } })
    const blocker = await fixture.host.spawn.start({ prompt: 'hold the slot', parent: fixture.parent })
    await fixture.model.requested(1)
    const timeoutMs = 300
    const starting = fixture.host.spawn.start({ prompt: 'go', parent: fixture.parent, limits: { timeoutMs } })
    const published = new Promise<number>((resolve) => fixture.host.on('subagent/start', () => resolve(performance.now())))
    // It waits past its deadline before it is built. A timer, read as a lower bound: a late one only waits longer.
    await sleep(timeoutMs + 100)
    await blocker.dispose()
    const run = await starting
    await fixture.model.requested(2)
    expect(await run.result).toMatchObject({ stopReason: 'aborted', diagnostic: `the child exceeded limits.timeoutMs (${timeoutMs} ms)` })
    // Counted from its publication, it ran its whole deadline (a timer may fire a millisecond early).
    expect(performance.now() - (await published)).toBeGreaterThanOrEqual(timeoutMs - 5)
    await run.dispose()
  })

  it("a token budget spent by a grandchild stops the whole subtree, each with the budget's reason", async () => {
    const fixture = withNoop(
      setup(transport, [
        callStep('d1', 10, 'subagent', { description: 'grandchild task', prompt: 'spend' }),
        callStep('g1', 50),
        callStep('g2', 50),
        textStep('never'),
      ]),
    )
    fixture.host.tools.register(createSubagentTool(fixture.host, { provider: 'spawn', enableRunInBackground: false }))
    const lifecycle = recordLifecycle(fixture.host)
    const limitsOf = new Map<string, unknown>()
    fixture.host.on('subagent/start', (start) => limitsOf.set(start.id, fixture.host.agents.get(start.id)?.session.header.limits))
    const result = await fixture.host.spawn.run({ prompt: 'delegate', parent: fixture.parent, limits: { maxTotalTokens: 100 } })
    expect(result).toMatchObject({ stopReason: 'aborted', diagnostic: 'the child exceeded limits.maxTotalTokens (100 tokens)' })
    expect(fixture.model.requests).toHaveLength(3)
    await lifecycle.ended(2)
    const grandchild = lifecycle.ends.find((end) => end.depth === 2)!
    expect(grandchild).toMatchObject({ stopReason: 'aborted', diagnostic: 'the child exceeded limits.maxTotalTokens (100 tokens)' })
    // The grandchild asked for nothing and got what its parent had left after its first step.
    expect(limitsOf.get(grandchild.id)).toEqual({ maxTotalTokens: 90 })
  })

  it("a token budget spent by one grandchild cancels another still running (a background job waiting on its model) with the same reason", async () => {
    // Requests are told apart by the task each child was given: the children run side by side.
    let waiting!: () => void
    const waited = new Promise<void>((resolve) => (waiting = resolve))
    const task = (request: ModelRequest) => textOf((request.messages[0]!.content as ContentBlock[]).filter((block) => block.type === 'text'))
    const route: ScriptEntry = async (request) => {
      const steps = request.messages.filter((message) => message.role === 'assistant').length
      switch (task(request)) {
        case 'delegate':
          return steps === 0 ? callStep('b1', 2, 'subagent', { description: 'waits', prompt: 'wait', run_in_background: true }) : callStep('d1', 2, 'subagent', { description: 'spends', prompt: 'spend' })
        case 'wait':
          waiting()
          return new Promise<never>(() => {}) // until the child is cancelled
        default:
          await waited
          return callStep('g1', 100)
      }
    }
    const fixture = withNoop(setup(transport, [route, route, route, route, route]))
    fixture.host.tools.register(createSubagentTool(fixture.host, { provider: 'spawn' }))
    const lifecycle = recordLifecycle(fixture.host)
    const result = await fixture.host.spawn.run({ prompt: 'delegate', parent: fixture.parent, limits: { maxTotalTokens: 100 } })
    const diagnostic = 'the child exceeded limits.maxTotalTokens (100 tokens)'
    expect(result).toMatchObject({ stopReason: 'aborted', diagnostic })
    await lifecycle.ended(3)
    const grandchildren = lifecycle.ends.filter((end) => end.depth === 2)
    expect(grandchildren).toHaveLength(2)
    for (const end of grandchildren) expect(end).toMatchObject({ stopReason: 'aborted', diagnostic })
    // Four requests: the child's two steps, and one of each grandchild; nothing after the budget was spent.
    expect(fixture.model.requests).toHaveLength(4)
  })

  it('a token budget spent after a child finished its turn cancels what that child started and still runs (a background job), with the same reason', async () => {
    let waiting!: () => void
    const waited = new Promise<void>((resolve) => (waiting = resolve))
    const task = (request: ModelRequest) => textOf((request.messages[0]!.content as ContentBlock[]).filter((block) => block.type === 'text'))
    const route: ScriptEntry = (request) => {
      const steps = request.messages.filter((message) => message.role === 'assistant').length
      switch (task(request)) {
        case 'delegate':
          return steps === 0 ? callStep('b1', 2, 'subagent', { description: 'waits', prompt: 'wait', run_in_background: true }) : textStep('child done')
        case 'wait':
          waiting()
          return new Promise<never>(() => {}) // until the job is cancelled
        default:
          return textStep('spent the rest', 100)
      }
    }
    const fixture = setup(transport, [route, route, route, route])
    fixture.host.tools.register(createSubagentTool(fixture.host, { provider: 'spawn' }))
    const lifecycle = recordLifecycle(fixture.host)
    const top = fixture.host.createAgent({ options: { provider: 'scripted' }, limits: { maxTotalTokens: 100 } })
    const child = await fixture.host.spawn.start({ prompt: 'delegate', parent: top })
    expect(await child.result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'child done' }] })
    await waited
    // The top-level agent's own step spends what is left: the child is done, not disposed, and its job runs on.
    expect(await top.run('spend')).toMatchObject({ stopReason: 'completed' })
    await lifecycle.ended(2)
    const job = lifecycle.ends.find((end) => end.depth === 2)!
    expect(job).toMatchObject({ stopReason: 'aborted', diagnostic: 'the child exceeded limits.maxTotalTokens (100 tokens)' })
    expect(fixture.model.requests).toHaveLength(4)
    await child.dispose()
  })

  it('the subagent tool passes its limits to every child and renders a limit stop as a cancelled run with the diagnostic', async () => {
    const fixture = withNoop(setup(transport, [callStep('c1'), callStep('c2'), callStep('b1'), callStep('b2')]))
    const tool = createSubagentTool(fixture.host, { provider: 'spawn', limits: { maxSteps: 1 } })
    const exec = { agent: fixture.parent, callId: 't1', signal: new AbortController().signal, concludeTurn: () => {} }
    await expect(tool.execute({ description: 'bounded task', prompt: 'go' }, exec)).rejects.toThrow(
      'subagent run was cancelled\nDiagnostic: the child exceeded limits.maxSteps (1 steps)',
    )
    const started = (await tool.execute({ description: 'background task', prompt: 'go', run_in_background: true }, exec)) as { jobId: string }
    const job = await fixture.host.jobs.wait(started.jobId)
    expect(job).toMatchObject({ status: 'killed', limit: 'maxSteps', detail: 'the child exceeded limits.maxSteps (1 steps)' })
    const jobList = createJobTools(fixture.host).find((t) => t.name === 'job_list')!
    expect(await jobList.execute({}, exec)).toBe(`${started.jobId}  killed (limits.maxSteps)  background task`)
  })

  it('values are checked up front with InvalidOptionError naming the limit', async () => {
    const fixture = setup(transport)
    const bad = (limits: unknown) => fixture.host.spawn.start({ prompt: 'x', parent: fixture.parent, limits: limits as { maxSteps: number } })
    await expect(bad({ timeoutMs: 0 })).rejects.toMatchObject({ name: 'InvalidOptionError', option: 'limits.timeoutMs' })
    await expect(bad({ maxSteps: 1.5 })).rejects.toMatchObject({ option: 'limits.maxSteps' })
    await expect(bad({ maxTotalTokens: -1 })).rejects.toMatchObject({ option: 'limits.maxTotalTokens' })
    await expect(bad({ maxTurns: 3 })).rejects.toMatchObject({ option: 'limits.maxTurns' })
    expect(() => createHost({ limits: { maxSteps: Number.MAX_SAFE_INTEGER + 1 } })).toThrow(InvalidOptionError)
    expect(() => createSubagentTool(fixture.host, { provider: 'spawn', limits: { timeoutMs: '5' as unknown as number } })).toThrow(/limits\.timeoutMs/)
    expect(() => fixture.host.createAgent({ limits: { maxTotalTokens: 0 } })).toThrow(/limits\.maxTotalTokens/)
    expect(fixture.model.requests).toHaveLength(0)
  })

  describe('resumed', () => {
    let dir: string | undefined
    afterEach(async () => {
      if (dir) await rm(dir, { recursive: true, force: true })
      dir = undefined
    })

    it('a resumed agent whose tree already spent its whole budget makes no request: its turn ends aborted with the limit', async () => {
      const script = [callStep('d1', 10, 'subagent', { description: 'spends', prompt: 'spend' }), textStep('child done', 80), textStep('parent done', 10), textStep('never')]
      const fixture = setup(transport, script, { store: createMemoryStore() })
      fixture.host.tools.register(createSubagentTool(fixture.host, { provider: 'spawn', enableRunInBackground: false }))
      const top = fixture.host.createAgent({ options: { provider: 'scripted' }, limits: { maxTotalTokens: 100 } })
      // 10 and 10 of its own, 80 of its child's: its last step reaches the budget and ends the turn.
      expect(await top.run('delegate')).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'parent done' }] })
      await top.dispose()
      const resumed = await fixture.host.resumeAgent(top.id)
      expect(await resumed.run('more')).toEqual({ output: [], stopReason: 'aborted', diagnostic: 'the child exceeded limits.maxTotalTokens (100 tokens)' })
      expect(fixture.model.requests).toHaveLength(3)
      expect(lastTurnEnd(resumed.session.events)).toEqual(limitEnd('maxTotalTokens', 100))
      await resumed.dispose()
    })

    it("a child's step that spends its parent's budget is recorded before the parent is stopped: the store holds it, and the resumed parent makes no request", async () => {
      const script = [callStep('d1', 10, 'subagent', { description: 'spends', prompt: 'spend' }), textStep('child done', 90), textStep('never'), textStep('never either')]
      const store = createMemoryStore()
      const fixture = setup(transport, script, { store })
      fixture.host.tools.register(createSubagentTool(fixture.host, { provider: 'spawn', enableRunInBackground: false }))
      const top = fixture.host.createAgent({ options: { provider: 'scripted' }, limits: { maxTotalTokens: 100 } })
      // 10 of its own, 90 of its child's last step: the child completes, as inline stops at its record; the parent is stopped.
      expect(await top.run('delegate')).toMatchObject({ stopReason: 'aborted', diagnostic: 'the child exceeded limits.maxTotalTokens (100 tokens)' })
      const [child] = (await store.list({ parentSession: top.id })).sessions
      const { events } = (await store.read(child!.id))!
      expect(events.flatMap((event) => (event.type === 'assistant/message' ? [event.data.usage] : []))).toEqual([{ inputTokens: 45, outputTokens: 45 }])
      expect(lastTurnEnd(events)).toEqual({ kind: 'completed' })
      await top.dispose()
      const resumed = await fixture.host.resumeAgent(top.id)
      expect(await resumed.run('more')).toEqual({ output: [], stopReason: 'aborted', diagnostic: 'the child exceeded limits.maxTotalTokens (100 tokens)' })
      expect(fixture.model.requests).toHaveLength(2)
      await resumed.dispose()
    })

    it('a resumed child keeps what its budget had left, its descendants’ spending included (ndjson store)', async () => {
      dir = await mkdtemp(join(tmpdir(), 'sw-limits-'))
      const store = createNdjsonStore(dir)
      const fixture = withNoop(
        setup(
          transport,
          [callStep('d1', 20, 'subagent', { description: 'grandchild task', prompt: 'spend' }), callStep('g1', 40), textStep('g done', 0), textStep('child done', 0)],
          { store },
        ),
      )
      fixture.host.tools.register(createSubagentTool(fixture.host, { provider: 'spawn', enableRunInBackground: false }))
      const run = await fixture.host.spawn.start({ prompt: 'delegate', parent: fixture.parent, limits: { maxTotalTokens: 100 } })
      expect(await run.result).toMatchObject({ stopReason: 'completed' })
      await run.dispose()
      await closeHosts()

      // 20 of its own and 40 of its grandchild's are spent: 40 are left.
      const again = createHost({ isolation: 'inline', store: createNdjsonStore(dir) })
      try {
        const model = new ScriptedModel([callStep('r1', 20), callStep('r2', 20), callStep('r3', 20), textResponse('never')])
        again.models.register('scripted', model)
        again.tools.register(noop)
        const child = await again.resumeAgent(run.id)
        expect(child.session.header.limits).toEqual({ maxTotalTokens: 100 })
        const outcome = await child.run('more')
        expect(outcome).toMatchObject({ stopReason: 'aborted', diagnostic: 'the child exceeded limits.maxTotalTokens (100 tokens)' })
        expect(model.requests).toHaveLength(2)
        await child.dispose()
      } finally {
        await again.close()
      }
    })
  })
})
