/**
 * CONTRACT.md §1-§3 and DESIGN.md's surface: the one-call forms and what a caller reads off a run.
 * `provider.run` is start, then result, then dispose; the signal may be left out; runs are
 * async-disposable; usage is summed over the child's own steps; a top-level agent runs a turn
 * in one call and can be disposed.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { createMemoryStore, textResponse, toolCallResponse, type StreamChunk } from 'subagent-worker'
import { closeHosts, failingStore, setup, TRANSPORTS } from '../support/harness.js'

afterEach(closeHosts)

describe.each(TRANSPORTS)('one-call forms [%s]', (transport) => {
  it('provider.run is start, then result, then dispose: it resolves with the result and the child is gone', async () => {
    const fx = setup(transport, [textResponse('one call')])
    const result = await fx.host.spawn.run({ prompt: 'hi', parent: fx.parent })
    expect(result).toEqual({ output: [{ type: 'text', text: 'one call' }], usage: { inputTokens: 0, outputTokens: 2 }, totalUsage: { inputTokens: 0, outputTokens: 2 }, stopReason: 'completed' })
    expect(fx.host.agents.list().map((agent) => agent.id)).toEqual([fx.parent.id])
  })

  it('provider.run rejects with the release error when only releasing the child failed', async () => {
    const fx = setup(transport, [textResponse('kept in memory only')], { store: failingStore() })
    await expect(fx.host.fork.run({ prompt: 'hi', parent: fx.parent })).rejects.toThrow(/session store failed for ".*": disk full/)
    expect(fx.host.agents.list().map((agent) => agent.id)).toEqual([fx.parent.id])
  })

  it('a run started without a signal runs to completion, and is cancelled by dispose()', async () => {
    const fx = setup(transport, [textResponse('no signal needed'), 'hang'])
    const done = await fx.host.spawn.start({ prompt: 'one', parent: fx.parent })
    expect((await done.result).stopReason).toBe('completed')
    await done.dispose()
    const hanging = await fx.host.spawn.start({ prompt: 'two', parent: fx.parent })
    await fx.model.requested(2)
    await hanging.dispose()
    expect((await hanging.result).stopReason).toBe('aborted')
  })

  it('a run without a signal is cancelled by host.close()', async () => {
    const fx = setup(transport, ['hang'])
    const run = await fx.host.spawn.start({ prompt: 'wait', parent: fx.parent })
    await fx.model.requested(1)
    await fx.host.close()
    expect((await run.result).stopReason).toBe('aborted')
  })

  it('a signal that is not an AbortSignal is refused before anything starts', async () => {
    const fx = setup(transport, [textResponse('never')])
    await expect(fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: {} as AbortSignal })).rejects.toThrow('subagent request signal must be an AbortSignal when given')
    expect(fx.model.requests).toHaveLength(0)
  })

  it('a run is async-disposable: Symbol.asyncDispose is dispose()', async () => {
    const fx = setup(transport, ['hang'])
    const run = await fx.host.spawn.start({ prompt: 'wait', parent: fx.parent })
    await fx.model.requested(1)
    await run[Symbol.asyncDispose]()
    expect((await run.result).stopReason).toBe('aborted')
    expect(fx.host.agents.get(run.id)).toBeUndefined()
  })
})

describe.each(TRANSPORTS)('§3 usage [%s]', (transport) => {
  const usage = (inputTokens: number, outputTokens: number): StreamChunk => ({ type: 'usage', inputTokens, outputTokens })

  it("is the sum of the child's own steps", async () => {
    const fx = setup(transport, [
      [...toolCallResponse('c1', 'no_such_tool', {}).filter((c) => c.type !== 'usage'), usage(10, 4)],
      [{ type: 'text-delta', text: 'done' }, usage(25, 6), { type: 'finish', reason: 'stop' }],
    ])
    const result = await fx.host.spawn.run({ prompt: 'hi', parent: fx.parent })
    expect(result.usage).toEqual({ inputTokens: 35, outputTokens: 10 })
  })

  it('is absent when no step reported any', async () => {
    const fx = setup(transport, [[{ type: 'text-delta', text: 'untallied' }, { type: 'finish', reason: 'stop' }]])
    const result = await fx.host.spawn.run({ prompt: 'hi', parent: fx.parent })
    expect(result).toEqual({ output: [{ type: 'text', text: 'untallied' }], stopReason: 'completed' })
  })

  it("never counts a fork seed's steps: only the child's own", async () => {
    const fx = setup(transport, [[{ type: 'text-delta', text: 'parent' }, usage(100, 100), { type: 'finish', reason: 'stop' }], [{ type: 'text-delta', text: 'child' }, usage(1, 2), { type: 'finish', reason: 'stop' }]])
    await fx.parent.run('first')
    const result = await fx.host.fork.run({ prompt: 'hi', parent: fx.parent })
    expect(result.usage).toEqual({ inputTokens: 1, outputTokens: 2 })
  })
})

describe.each(TRANSPORTS)('a top-level agent [%s]', (transport) => {
  it('run(message) resolves with its turn: output, stop reason and usage', async () => {
    const fx = setup(transport, [textResponse('hello from the top')])
    const outcome = await fx.parent.run('hi')
    expect(outcome).toEqual({ output: [{ type: 'text', text: 'hello from the top' }], stopReason: 'completed', usage: { inputTokens: 0, outputTokens: 5 } })
  })

  it('dispose() cancels it, removes it from host.agents, and keeps its transcript in the store', async () => {
    const store = createMemoryStore()
    const fx = setup(transport, ['hang'], { store })
    fx.parent.followup('wait')
    await fx.model.requested(1)
    await fx.parent.dispose()
    expect(fx.host.agents.get(fx.parent.id)).toBeUndefined()
    const stored = await store.read(fx.parent.id)
    expect(stored!.events.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: { kind: 'aborted' } } })
    await expect(fx.parent.run('again')).rejects.toThrow(/was disposed/)
  })
})
