// CONTRACT.md §5 (Fork): the seed, seedLength, and child output never taken from the seed.
import { afterEach, describe, expect, it } from 'vitest'
import { createMemoryStore, refusalResponse, textResponse, type SessionEvent } from 'subagent-worker'
import { closeHosts, eventsOf, setup, signal, TRANSPORTS, types } from '../support/harness.js'
import { childEvents, childView, foreignParent, recordLifecycle } from '../support/driver-helpers.js'

afterEach(closeHosts)

function lastTurnEnd(events: readonly SessionEvent[]): number {
  return events.map((e) => e.type).lastIndexOf('turn/end')
}

describe.each(TRANSPORTS)('§5 fork [%s]', (transport) => {
  it('§5 fork inherits the parent context and spawn does not', () => {
    const { host } = setup(transport)
    expect(host.fork.name).toBe('fork')
    expect(host.fork.inheritsParentContext).toBe(true)
    expect(host.spawn.name).toBe('spawn')
    expect(host.spawn.inheritsParentContext).toBe(false)
  })

  it("§5 the child's first events equal the parent's events up to its last turn/end, and seedLength records their number", async () => {
    const store = createMemoryStore()
    const fx = setup(transport, [textResponse('parent one'), textResponse('parent two'), textResponse('child answer')], { store })
    fx.parent.followup('first question')
    await fx.parent.whenIdle()
    fx.parent.followup('second question')
    await fx.parent.whenIdle()
    const seed = structuredClone([...fx.parent.session.events])
    expect(seed.at(-1)!.type).toBe('turn/end')

    const run = await fx.host.fork.start({ prompt: 'child task', parent: fx.parent, signal: signal() })
    const view = childView(fx.host, run)
    expect(view.session.header.seedLength).toBe(seed.length)
    await run.result
    const events = childEvents(fx.host, run)
    expect(events.slice(0, seed.length)).toEqual(seed)
    expect(types(events.slice(seed.length))[0]).toBe('turn/start')
    await run.dispose()

    const stored = await store.read(run.id)
    expect(stored?.header.seedLength).toBe(seed.length)
    expect(stored?.events.slice(0, seed.length)).toEqual(seed)
    expect(stored?.events).toHaveLength(events.length)
  })

  it("§5 the seed never copies the parent's in-flight turn", async () => {
    const fx = setup(transport, [textResponse('parent done'), 'hang', textResponse('child answer')])
    fx.parent.followup('completed turn')
    await fx.parent.whenIdle()
    const completed = structuredClone([...fx.parent.session.events])
    fx.parent.followup('in-flight turn')
    await fx.model.requested(2)
    expect(fx.parent.session.events.length).toBeGreaterThan(completed.length)

    const run = await fx.host.fork.start({ prompt: 'child task', parent: fx.parent, signal: signal() })
    expect(childView(fx.host, run).session.header.seedLength).toBe(completed.length)
    expect(await run.result).toEqual({ output: [{ type: 'text', text: 'child answer' }], usage: { inputTokens: 0, outputTokens: 3 }, totalUsage: { inputTokens: 0, outputTokens: 3 }, stopReason: 'completed' })
    const events = childEvents(fx.host, run)
    expect(events.slice(0, completed.length)).toEqual(completed)
    const own = events.slice(completed.length)
    expect(eventsOf<{ content: unknown }>(own, 'user/message').map((m) => m.content)).toEqual([[{ type: 'text', text: 'child task' }]])
    expect(JSON.stringify(events)).not.toContain('in-flight turn')
    // the child's model saw the completed turn only
    expect(fx.model.requests[2]!.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'completed turn' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'parent done' }] },
      { role: 'user', content: [{ type: 'text', text: 'child task' }] },
    ])
    fx.parent.cancel()
    await fx.parent.whenIdle()
    await run.dispose()
  })

  it('§5 before any completed turn the child starts fresh (no events at all)', async () => {
    const fx = setup(transport, [textResponse('child answer')])
    const run = await fx.host.fork.start({ prompt: 'child task', parent: fx.parent, signal: signal() })
    expect(childView(fx.host, run).session.header).not.toHaveProperty('seedLength')
    await run.result
    expect(types(childEvents(fx.host, run))[0]).toBe('turn/start')
    expect(fx.model.requests[0]!.messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'child task' }] }])
    await run.dispose()
  })

  it('§5 before any completed turn the child starts fresh (parent in its first turn)', async () => {
    const fx = setup(transport, ['hang', textResponse('child answer')])
    fx.parent.followup('first turn, still running')
    await fx.model.requested(1)
    const run = await fx.host.fork.start({ prompt: 'child task', parent: fx.parent, signal: signal() })
    expect(childView(fx.host, run).session.header).not.toHaveProperty('seedLength')
    expect(await run.result).toEqual({ output: [{ type: 'text', text: 'child answer' }], usage: { inputTokens: 0, outputTokens: 3 }, totalUsage: { inputTokens: 0, outputTokens: 3 }, stopReason: 'completed' })
    const events = childEvents(fx.host, run)
    expect(types(events)[0]).toBe('turn/start')
    expect(JSON.stringify(events)).not.toContain('first turn, still running')
    fx.parent.cancel()
    await fx.parent.whenIdle()
    await run.dispose()
  })

  it("§5 the seeded conversation reaches the child's model before the child's prompt", async () => {
    const fx = setup(transport, [textResponse('the parent knows X'), textResponse('child answer')])
    fx.parent.followup('tell me X')
    await fx.parent.whenIdle()
    const run = await fx.host.fork.start({ prompt: 'use X', parent: fx.parent, signal: signal() })
    await run.result
    expect(fx.model.requests[1]!.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'tell me X' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'the parent knows X' }] },
      { role: 'user', content: [{ type: 'text', text: 'use X' }] },
    ])
    await run.dispose()
  })

  it('§5 no seeded parent message is mistaken for child output (child fails before any output)', async () => {
    const fx = setup(transport, [
      textResponse('parent answer'),
      () => {
        throw new Error('child model down')
      },
    ])
    const lifecycle = recordLifecycle(fx.host)
    fx.parent.followup('question')
    await fx.parent.whenIdle()
    const run = await fx.host.fork.start({ prompt: 'child task', parent: fx.parent, signal: signal() })
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.output).toEqual([])
    await lifecycle.ended(1)
    expect(lifecycle.ends[0]!.lastAssistantMessage).toBeUndefined()
    await run.dispose()
  })

  it('§5 no seeded parent message is mistaken for child output (child refuses with no text)', async () => {
    const fx = setup(transport, [textResponse('parent answer'), refusalResponse()])
    fx.parent.followup('question')
    await fx.parent.whenIdle()
    const run = await fx.host.fork.start({ prompt: 'child task', parent: fx.parent, signal: signal() })
    expect(await run.result).toEqual(expect.objectContaining({ output: [], stopReason: 'refusal' }))
    await run.dispose()
  })

  it('§5 no seeded parent turn end decides the stop reason (hand-off gap child of a completed parent)', async () => {
    const fx = setup(transport, [textResponse('parent answer'), textResponse('never')])
    fx.parent.followup('question')
    await fx.parent.whenIdle()
    const controller = new AbortController()
    fx.host.on('subagent/start', () => controller.abort())
    const run = await fx.host.fork.start({ prompt: 'child task', parent: fx.parent, signal: controller.signal })
    expect(await run.result).toEqual({ output: [], stopReason: 'aborted' })
    await run.dispose()
  })

  it('§5 a foreign parent is forked from its own events, unknown event types included', async () => {
    const events: SessionEvent[] = [
      { seq: 0, type: 'turn/start', data: {} },
      { seq: 1, type: 'user/message', data: { content: [{ type: 'text', text: 'foreign question' }], source: { kind: 'user' } } },
      // A type this library does not know is outside the union: a foreign harness casts it in.
      { seq: 2, type: 'custom/note', data: { note: 'harness-specific', nested: { n: 1 } } } as unknown as SessionEvent,
      { seq: 3, type: 'assistant/message', data: { content: [{ type: 'text', text: 'foreign answer' }] } },
      { seq: 4, type: 'turn/end', data: { reason: { kind: 'completed' } } },
      { seq: 5, type: 'turn/start', data: {} },
      { seq: 6, type: 'user/message', data: { content: [{ type: 'text', text: 'unfinished' }], source: { kind: 'user' } } },
    ]
    const fx = setup(transport, [textResponse('child answer')])
    const parent = foreignParent({ id: 'foreign', events })
    const run = await fx.host.fork.start({ prompt: 'child task', parent, signal: signal() })
    expect(childView(fx.host, run).session.header.seedLength).toBe(5)
    expect(await run.result).toEqual({ output: [{ type: 'text', text: 'child answer' }], usage: { inputTokens: 0, outputTokens: 3 }, totalUsage: { inputTokens: 0, outputTokens: 3 }, stopReason: 'completed' })
    expect(childEvents(fx.host, run).slice(0, 5)).toEqual(events.slice(0, 5))
    await run.dispose()
  })

  it("§5 a foreign parent whose events are not numbered 0, 1, 2, ... is refused before publication: the child's record could not be read in seq order", async () => {
    const events: SessionEvent[] = [
      { seq: 10, type: 'turn/start', data: {} },
      { seq: 11, type: 'user/message', data: { content: [{ type: 'text', text: 'numbered its own way' }], source: { kind: 'user' } } },
      { seq: 12, type: 'turn/end', data: { reason: { kind: 'completed' } } },
    ]
    const fx = setup(transport, [textResponse('never')])
    const starts = recordLifecycle(fx.host)
    const parent = foreignParent({ id: 'foreign-numbered', events })
    await expect(fx.host.fork.start({ prompt: 'child task', parent, signal: signal() })).rejects.toMatchObject({
      code: 'ERR_SUBAGENT_REQUEST',
      message: 'parent session event 0 has seq 10: a forked seed must be numbered 0, 1, 2, ... in order, since the child numbers its own events on from it',
    })
    expect(starts.starts).toEqual([])
    expect(fx.model.requests).toHaveLength(0)
    // Spawning from it is not a fork: no seed, nothing to number on from.
    expect(await fx.host.spawn.run({ prompt: 'child task', parent, signal: signal() })).toMatchObject({ stopReason: 'completed' })
  })

  it('§5 the seed is a snapshot: the parent moving on does not change the child', async () => {
    const fx = setup(transport, [textResponse('parent one'), { delayMs: 30, chunks: textResponse('child answer') }, textResponse('parent two')])
    fx.parent.followup('first')
    await fx.parent.whenIdle()
    const seed = structuredClone([...fx.parent.session.events])
    const run = await fx.host.fork.start({ prompt: 'child task', parent: fx.parent, signal: signal() })
    await fx.model.requested(2)
    fx.parent.followup('second')
    await fx.parent.whenIdle()
    await run.result
    const events = childEvents(fx.host, run)
    expect(childView(fx.host, run).session.header.seedLength).toBe(seed.length)
    expect(events.slice(0, seed.length)).toEqual(seed)
    expect(JSON.stringify(events)).not.toContain('parent two')
    expect(lastTurnEnd(events)).toBe(events.length - 1)
    await run.dispose()
  })

  it("§5 spawn ignores the parent's context even after completed turns", async () => {
    const fx = setup(transport, [textResponse('parent answer'), textResponse('child answer')])
    fx.parent.followup('question')
    await fx.parent.whenIdle()
    const run = await fx.host.spawn.start({ prompt: 'child task', parent: fx.parent, signal: signal() })
    expect(childView(fx.host, run).session.header).not.toHaveProperty('seedLength')
    await run.result
    expect(types(childEvents(fx.host, run))[0]).toBe('turn/start')
    expect(fx.model.requests[1]!.messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'child task' }] }])
    await run.dispose()
  })

  it("§5 a forked child's header records parentSession, origin, delegationDepth and seedLength; its descriptor names 'fork'", async () => {
    const fx = setup(transport, [textResponse('parent answer'), textResponse('child answer')])
    fx.parent.followup('question')
    await fx.parent.whenIdle()
    const seedLength = fx.parent.session.events.length
    const run = await fx.host.fork.start({ prompt: 'child task', parent: fx.parent, signal: signal(), label: 'forked helper' })
    expect(childView(fx.host, run).session.header).toMatchObject({ parentSession: fx.parent.id, origin: 'subagent', delegationDepth: 1, seedLength })
    await run.result
    expect(eventsOf(childEvents(fx.host, run), 'subagent/descriptor')).toEqual([{ mode: 'one-shot', provider: 'fork', label: 'forked helper' }])
    await run.dispose()
  })
})
