/**
 * Thread-mates survive (CONTRACT.md §8), its two halves by hand: the host's judgement of where a
 * child is when its runner goes (move-point.ts), and a child rebuilt from its session going on
 * with its open turn (the loop's resume), keeping a structured value it had captured.
 */
import { describe, expect, it } from 'vitest'
import { composeChild } from '../../dist/agent/child.js'
import { CallLedger } from '../../dist/parent/runners/call-ledger.js'
import { movePoint, type Mobility, type RunnerHooks } from '../../dist/parent/runners/move-point.js'
import { ScriptedModel, textResponse, type SessionEvent } from 'subagent-worker'

type Raw = { type: string; data: unknown }
const session = (raw: Raw[]): SessionEvent[] => raw.map((event, seq) => ({ seq, ...event }) as SessionEvent)
const start: Raw[] = [
  { type: 'turn/start', data: {} },
  { type: 'user/message', data: { content: [{ type: 'text', text: 'go' }], source: { kind: 'parent' } } },
]
const call = (id: string, name: string, args = '{}') => ({ type: 'tool-call', id, name, arguments: args })
const message = (...calls: ReturnType<typeof call>[]): Raw => ({ type: 'assistant/message', data: { content: calls } })
const result = (callId: string, name: string, isError = false): Raw => ({ type: 'tool/result', data: { callId, name, isError, content: [{ type: 'text', text: 'ok' }] } })

const noHooks: RunnerHooks = new Set()
function where(raw: Raw[], ledger = new CallLedger(), overrides: { hooks?: RunnerHooks; hostModel?: boolean; maxParallel?: number; mobility?: Mobility } = {}) {
  return movePoint({
    events: session(raw),
    from: 0,
    ledger,
    hostModel: overrides.hostModel ?? true,
    hooks: 'hooks' in overrides ? overrides.hooks : noHooks,
    maxParallel: overrides.maxParallel ?? 8,
    mobility: overrides.mobility ?? 'heard',
    runsNoModuleCode: (name) => name === 'structured_output',
  })
}
/** A ledger with a host tool run for each id (done ones answered). */
function ledgerWith(running: string[], done: string[] = []): CallLedger {
  const ledger = new CallLedger()
  const never = new AbortController().signal
  for (const id of running) void ledger.tool('host_tool', id, never, () => new Promise(() => {})).catch(() => {})
  for (const id of done) void ledger.tool('host_tool', id, never, async () => ({ text: 'done', concluded: false }))
  return ledger
}

describe('where a child is when its runner goes', () => {
  it('waiting on its host model: it moves and makes the request again', () => {
    const ledger = new CallLedger()
    void ledger.model(() => new Promise(() => {}))
    expect(where([...start, { type: 'assistant/chunk', data: { chunk: { type: 'text-delta', text: 'part' } } }], ledger)).toEqual({ concluded: false })
  })

  it('between steps, with a host model and no beforeStep hook: it moves; with the hook, or a module model, or hooks unknown, it does not', () => {
    const between = [...start, message(call('h', 'host_tool')), result('h', 'host_tool')]
    expect(where(between)).toEqual({ concluded: false })
    expect(where(between, undefined, { hooks: new Set(['beforeStep']) })).toBeUndefined()
    expect(where(between, undefined, { hostModel: false })).toBeUndefined()
    expect(where(between, undefined, { hooks: undefined })).toBeUndefined()
    // No turn at all: it was never published (the host records the turn's start as it publishes).
    expect(where([])).toBeUndefined()
  })

  it('waiting on host tools beside calls the runner answers without module code (structured_output): it moves, unless an afterTool hook reads their results', () => {
    for (const other of ['structured_output']) {
      const step = [...start, message(call('a', 'host_tool'), call('o', other))]
      expect(where(step, ledgerWith(['a']))).toEqual({ concluded: false })
      expect(where(step, ledgerWith(['a']), { hooks: new Set(['afterTool']) })).toBeUndefined()
      expect(where(step, ledgerWith(['a']), { hooks: undefined })).toBeUndefined()
    }
    // A module tool after them may have begun: it keeps the child.
    expect(where([...start, message(call('a', 'host_tool'), call('o', 'structured_output'), call('m', 'module_tool'))], ledgerWith(['a']))).toBeUndefined()
  })

  it('waiting on host tools: it moves; a module tool of the step that may have begun keeps it', async () => {
    expect(where([...start, message(call('a', 'host_tool'))], ledgerWith(['a']))).toEqual({ concluded: false })
    // A module tool after the host tool, with slots free: it may be running.
    expect(where([...start, message(call('a', 'host_tool'), call('m', 'module_tool'))], ledgerWith(['a']))).toBeUndefined()
    // Every slot holds a running host tool: the module tool never began.
    expect(where([...start, message(call('a', 'host_tool'), call('m', 'module_tool'))], ledgerWith(['a']), { maxParallel: 1 })).toEqual({ concluded: false })
    // A module tool first, without its result: module code.
    expect(where([...start, message(call('m', 'module_tool'), call('a', 'host_tool'))], ledgerWith(['a']))).toBeUndefined()
    // A host tool done whose result is not recorded: an afterTool hook may be running on it.
    const done = ledgerWith([], ['a'])
    await done.runsOf('a')[0]!.reply
    expect(where([...start, message(call('a', 'host_tool'))], done, { hooks: new Set(['afterTool']) })).toBeUndefined()
    expect(where([...start, message(call('a', 'host_tool'))], done)).toEqual({ concluded: false })
  })

  it('two calls of a step with one id: each is a run of its own, and a move finds them in call order', async () => {
    const ledger = new CallLedger()
    const never = new AbortController().signal
    const executed: string[] = []
    const first = ledger.tool('host_tool', 'a', never, async () => (executed.push('first'), { text: 'first', concluded: false }))
    const second = ledger.tool('host_tool', 'a', never, async () => (executed.push('second'), { text: 'second', concluded: false }))
    expect([(await first).text, (await second).text]).toEqual(['first', 'second'])
    expect(executed).toEqual(['first', 'second'])
    expect(where([...start, message(call('a', 'host_tool'), call('a', 'host_tool'))], ledger)).toEqual({ concluded: false })
    // Moved: the new runner calls both again and is given each run's reply, in order; nothing runs twice.
    ledger.detach()
    const again = [ledger.tool('host_tool', 'a', never, async () => ({ text: 'ran again', concluded: false })), ledger.tool('host_tool', 'a', never, async () => ({ text: 'ran again', concluded: false }))]
    expect((await Promise.all(again)).map((reply) => reply.text)).toEqual(['first', 'second'])
    ledger.recorded('a')
    expect(ledger.runsOf('a').map((run) => run.name)).toEqual(['host_tool'])
    // Only one reached the host before the runner went, with slots free: where the second was is not known.
    const one = ledgerWith(['a'])
    expect(where([...start, message(call('a', 'host_tool'), call('a', 'host_tool'))], one)).toBeUndefined()
  })

  it('a turn that ended, or a step with no calls: only its last word was lost, so it does not move', () => {
    expect(where([...start, { type: 'turn/end', data: { reason: { kind: 'completed' } } }])).toBeUndefined()
    expect(where([...start, { type: 'assistant/message', data: { content: [{ type: 'text', text: 'done' }] } }])).toBeUndefined()
  })

  it('a captured structured value concludes the step: it moves to end its turn, whatever its hooks', () => {
    const captured = [...start, message(call('s', 'structured_output', '{"n":1}')), result('s', 'structured_output')]
    expect(where(captured, undefined, { hooks: new Set(['beforeStep']) })).toEqual({ concluded: true })
  })

  it("a node that died ('held': its last frames may be lost): only a child a host call in flight holds moves", async () => {
    const held = { mobility: 'held' } as const
    const model = new CallLedger()
    void model.model(() => new Promise(() => {}))
    expect(where([...start], model, held)).toEqual({ concluded: false })
    expect(where([...start, message(call('a', 'host_tool'))], ledgerWith(['a']), held)).toEqual({ concluded: false })
    // Between steps, never begun, its host tools all done, or a captured value: lost frames may hide what came next.
    expect(where([...start, message(call('h', 'host_tool')), result('h', 'host_tool')], undefined, held)).toBeUndefined()
    expect(where([], undefined, held)).toBeUndefined()
    const done = ledgerWith([], ['a'])
    await done.runsOf('a')[0]!.reply
    expect(where([...start, message(call('a', 'host_tool'))], done, held)).toBeUndefined()
    expect(where([...start, message(call('s', 'structured_output', '{"n":1}')), result('s', 'structured_output')], undefined, held)).toBeUndefined()
  })
})

describe('a child rebuilt from its session', () => {
  const spec = (seed: SessionEvent[], outputSchema?: Record<string, unknown>) => ({
    id: 'c1',
    header: { type: 'session' as const, id: 'c1', createdAt: new Date(0).toISOString() },
    options: { provider: 'm' },
    seed,
    descriptor: { mode: 'one-shot' as const, provider: 'spawn' },
    ...(outputSchema ? { outputSchema } : {}),
  })
  const env = (model: ScriptedModel) => ({ models: new Map([['m', model]]), tools: { get: () => undefined, list: () => [] }, hooks: {}, maxParallelToolCalls: 8, delegated: true })
  const view = { id: 'c1', options: {}, session: { header: spec([]).header, events: [] } }

  it('goes on with its open turn: the request is made again, its step count and description kept, the sequence contiguous', async () => {
    const seed = session([...start, { type: 'subagent/descriptor', data: { mode: 'one-shot', provider: 'spawn' } }, { type: 'assistant/chunk', data: { chunk: { type: 'text-delta', text: 'part' } } }, { type: 'child/moved', data: { reason: 'why' } }])
    const model = new ScriptedModel([textResponse('whole answer')])
    const { agent } = composeChild(spec(seed), env(model), view)
    agent.resume(false)
    await agent.whenIdle()
    const events = agent.session.events
    expect(events.slice(seed.length).map((event) => event.type)).toEqual(['assistant/chunk', 'assistant/message', 'turn/end'])
    expect(events.every((event, i) => event.seq === i)).toBe(true)
    expect(model.requests[0]!.messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'go' }] }])
  })

  it('keeps a structured value it had captured, and ends its turn with it', async () => {
    const seed = session([...start, message(call('s', 'structured_output', '{"n":1}')), result('s', 'structured_output')])
    const { agent, structured } = composeChild(spec(seed, { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] }), env(new ScriptedModel([])), view)
    expect(structured).toMatchObject({ captured: true, value: { n: 1 } })
    agent.resume(true)
    await agent.whenIdle()
    expect(agent.session.events.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: { kind: 'completed' } } })
  })
})
