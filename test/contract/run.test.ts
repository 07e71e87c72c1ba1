// CONTRACT.md §2 (The run): id, prompt, one turn, result settlement, parent abort and dispose.
import { getEventListeners } from 'node:events'
import { afterEach, describe, expect, it } from 'vitest'
import {
  createMemoryStore,
  defineTool,
  maxTokensResponse,
  refusalResponse,
  textResponse,
  toolCallResponse,
  type ContentBlock,
  type ScriptEntry,
} from 'subagent-worker'
import { closeHosts, eventsOf, setup, signal, TRANSPORTS, types } from '../support/harness.js'
import { childEvents, childView, eventOf, turnEnds } from '../support/driver-helpers.js'
import { gate } from '../support/loop-helpers.js'

afterEach(closeHosts)

describe.each(TRANSPORTS)('§2 the run [%s]', (transport) => {
  it("§2 run.id is the child's session id", async () => {
    const store = createMemoryStore()
    const fx = setup(transport, [textResponse('ok')], { store })
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    expect(childView(fx.host, run).id).toBe(run.id)
    expect(childView(fx.host, run).session.header.id).toBe(run.id)
    await run.result
    await run.dispose()
    expect((await store.read(run.id))?.header.id).toBe(run.id)
  })

  it("§2 a string prompt is sent as the child's user message", async () => {
    const fx = setup(transport, [textResponse('ok')])
    const run = await fx.host.spawn.start({ prompt: 'summarise the log', parent: fx.parent, signal: signal() })
    await run.result
    const messages = eventsOf<{ content: ContentBlock[] }>(childEvents(fx.host, run), 'user/message')
    expect(messages.map((m) => m.content)).toEqual([[{ type: 'text', text: 'summarise the log' }]])
    expect(fx.model.requests[0]!.messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'summarise the log' }] }])
    await run.dispose()
  })

  it("§2 once start() fulfils, the child's record holds its turn's start and its prompt, as inline's does at once", async () => {
    const fx = setup(transport, [textResponse('ok')])
    const run = await fx.host.spawn.start({ prompt: 'first of all', parent: fx.parent, signal: signal() })
    // Read before any of the child's own frames could arrive: the host recorded these as it published.
    expect(childEvents(fx.host, run).slice(0, 2).map(({ type, data }) => ({ type, data }))).toEqual([
      { type: 'turn/start', data: {} },
      { type: 'user/message', data: { content: [{ type: 'text', text: 'first of all' }], source: { kind: 'parent' } } },
    ])
    await run.result
    expect(types(childEvents(fx.host, run))).toEqual(['turn/start', 'user/message', 'subagent/descriptor', 'assistant/chunk', 'assistant/message', 'turn/end'])
    await run.dispose()
  })

  it("§2 a content-block prompt is sent unchanged as the child's user message", async () => {
    const fx = setup(transport, [textResponse('ok')])
    const prompt: ContentBlock[] = [
      { type: 'text', text: 'part one' },
      { type: 'text', text: 'part two' },
    ]
    const run = await fx.host.spawn.start({ prompt, parent: fx.parent, signal: signal() })
    await run.result
    expect(eventsOf<{ content: ContentBlock[] }>(childEvents(fx.host, run), 'user/message').map((m) => m.content)).toEqual([prompt])
    await run.dispose()
  })

  it('§2 the run drives exactly one turn, however many steps it takes', async () => {
    const fx = setup(transport, [toolCallResponse('c1', 'echo', { text: 'x' }), toolCallResponse('c2', 'echo', { text: 'y' }), textResponse('done')])
    fx.host.tools.register(
      defineTool({ name: 'echo', description: 'echo', parameters: { type: 'object', properties: { text: { type: 'string' } } }, execute: (args) => args['text'] }),
    )
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    expect(await run.result).toEqual({ output: [{ type: 'text', text: 'done' }], usage: { inputTokens: 0, outputTokens: 7 }, totalUsage: { inputTokens: 0, outputTokens: 7 }, stopReason: 'completed' })
    const list = types(childEvents(fx.host, run))
    expect(list.filter((t) => t === 'turn/start')).toHaveLength(1)
    expect(list.filter((t) => t === 'turn/end')).toHaveLength(1)
    expect(list.filter((t) => t === 'user/message')).toHaveLength(1)
    expect(list[0]).toBe('turn/start')
    expect(list.at(-1)).toBe('turn/end')
    expect(fx.model.requests).toHaveLength(3)
    await run.dispose()
  })

  const failures: Array<[string, ScriptEntry[], string]> = [
    [
      'a model stream failure',
      [
        () => {
          throw new Error('upstream 503')
        },
      ],
      'error',
    ],
    ['an exhausted model script', [], 'error'],
    ['max tokens', [maxTokensResponse('cut')], 'max-tokens'],
    ['a model refusal', [refusalResponse()], 'refusal'],
  ]
  it.each(failures)('§2 result resolves (never rejects) for a child-level failure: %s', async (_label, script, stopReason) => {
    const fx = setup(transport, script)
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    const result = await run.result
    expect(result.stopReason).toBe(stopReason)
    await run.dispose()
  })

  it('§2 result resolves (never rejects) when a tool crashes: the turn goes on and completes', async () => {
    const fx = setup(transport, [toolCallResponse('c1', 'crash', {}), textResponse('recovered')])
    fx.host.tools.register(
      defineTool({
        name: 'crash',
        description: 'always throws',
        parameters: { type: 'object', properties: {} },
        execute: () => {
          throw new Error('tool exploded')
        },
      }),
    )
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    expect(await run.result).toEqual({ output: [{ type: 'text', text: 'recovered' }], usage: { inputTokens: 0, outputTokens: 4 }, totalUsage: { inputTokens: 0, outputTokens: 4 }, stopReason: 'completed' })
    expect(eventsOf(childEvents(fx.host, run), 'tool/result')).toEqual([expect.objectContaining({ callId: 'c1', isError: true, code: 'FAILED' })])
    await run.dispose()
  })

  it('§2 result resolves (never rejects) when a beforeStep hook rejects the step', async () => {
    const fx = setup(transport, [textResponse('never')])
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal(), agentOptions: { model: 'reject-step' } })
    expect((await run.result).stopReason).toBe('refusal')
    await run.dispose()
  })
})

describe.each(TRANSPORTS)('§2 parent abort after publication [%s]', (transport) => {
  it("§2 the in-flight model request's signal is aborted with reason { kind: 'parent' }", async () => {
    const fx = setup(transport, ['hang'])
    const controller = new AbortController()
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: controller.signal })
    await fx.model.requested(1)
    const request = fx.model.requests[0]!
    expect(request.signal.aborted).toBe(false)
    controller.abort()
    await run.result
    expect(request.signal.aborted).toBe(true)
    expect(request.signal.reason).toEqual({ kind: 'parent' })
    await run.dispose()
  })

  it("§2 the child's turn ends { kind: 'aborted', reason: { kind: 'parent' } }", async () => {
    const fx = setup(transport, ['hang'])
    const controller = new AbortController()
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: controller.signal })
    await fx.model.requested(1)
    controller.abort()
    await run.result
    expect(turnEnds(childEvents(fx.host, run))).toEqual([{ kind: 'aborted', reason: { kind: 'parent' } }])
    await run.dispose()
  })

  it('§2 the result is aborted with the text streamed before the abort', async () => {
    const fx = setup(transport, ['hang'])
    const controller = new AbortController()
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: controller.signal })
    await fx.model.requested(1)
    await eventOf(run, 'assistant/chunk')
    controller.abort()
    expect(await run.result).toEqual({ output: [{ type: 'text', text: 'partial' }], stopReason: 'aborted' })
    await run.dispose()
  })

  it("§2 an abort while a tool runs ends the turn aborted with reason { kind: 'parent' } and keeps the step's output", async () => {
    const fx = setup(transport, [toolCallResponse('c1', 'wait', {}, 'working on it'), textResponse('never')])
    const started = gate()
    fx.host.tools.register(
      defineTool({
        name: 'wait',
        description: 'waits until cancelled',
        parameters: { type: 'object', properties: {} },
        execute: (_args, exec) =>
          new Promise((_, reject) => {
            started.open()
            exec.signal.addEventListener('abort', () => reject(new Error('cancelled')), { once: true })
          }),
      }),
    )
    const controller = new AbortController()
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: controller.signal })
    await started.promise
    controller.abort()
    const result = await run.result
    expect(result.stopReason).toBe('aborted')
    expect(result.output).toEqual([
      { type: 'text', text: 'working on it' },
      { type: 'tool-call', id: 'c1', name: 'wait', arguments: '{}' },
    ])
    expect(turnEnds(childEvents(fx.host, run))).toEqual([{ kind: 'aborted', reason: { kind: 'parent' } }])
    expect(fx.model.requests).toHaveLength(1)
    await run.dispose()
  })

  it("§7 a caller's own abort reason is the reason the child's model request and turn record, unchanged", async () => {
    // null, 0 and '' are reasons too: none is taken for a missing one. A structured clone keeps
    // neither an error's own fields nor (Node 20) a DOMException such as AbortSignal.timeout's.
    const reasons: unknown[] = [
      new Error('caller-specific reason'),
      Object.assign(new Error('with a code'), { code: 'E_CALLER' }),
      new DOMException('signal timed out', 'TimeoutError'),
      { kind: 'mine', n: 1 },
      'a string',
      null,
      0,
      '',
    ]
    const fx = setup(transport, reasons.map(() => 'hang' as const))
    for (const [i, reason] of reasons.entries()) {
      const controller = new AbortController()
      const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: controller.signal })
      await fx.model.requested(i + 1)
      controller.abort(reason)
      expect((await run.result).stopReason).toBe('aborted')
      // The very value on every transport: the host keeps the caller's, whatever crossed to the runner.
      expect(fx.model.requests[i]!.signal.reason).toBe(reason)
      const [end] = turnEnds(childEvents(fx.host, run)) as Array<{ kind: string; reason: unknown }>
      expect(end).toEqual({ kind: 'aborted', reason })
      expect(end!.reason).toBe(reason)
      await run.dispose()
    }
  })

  it('§7 a reason that cannot be cloned is what the model request and the turn record, itself; the record crosses again as plain data only', async () => {
    const reason = function uncloneable() {}
    const store = createMemoryStore()
    const fx = setup(transport, ['hang'], { store })
    const controller = new AbortController()
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: controller.signal })
    await fx.model.requested(1)
    controller.abort(reason)
    expect((await run.result).stopReason).toBe('aborted')
    expect(fx.model.requests[0]!.signal.reason).toBe(reason)
    // A runner records a description of it; the host's record, the one shown and stored, holds the value.
    const [end] = turnEnds(childEvents(fx.host, run)) as Array<{ kind: string; reason: unknown }>
    expect(end).toEqual({ kind: 'aborted', reason })
    expect(end!.reason).toBe(reason)
    // Forking it would send the value to a child: refused as for any record that is not plain data.
    await expect(fx.host.fork.start({ prompt: 'on', parent: childView(fx.host, run), signal: signal() })).rejects.toMatchObject({ code: 'ERR_SUBAGENT_REQUEST', message: expect.stringContaining('must be plain data to be forked') })
    await run.dispose()
    expect((await store.read(run.id))!.events.at(-1)).toEqual({ seq: expect.any(Number), type: 'turn/end', data: { reason: { kind: 'aborted', reason } } })
  })

  it("§2/§7 an abort without a reason of its own (the default AbortError) cancels with { kind: 'parent' }", async () => {
    const fx = setup(transport, ['hang'])
    const controller = new AbortController()
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: controller.signal })
    await fx.model.requested(1)
    controller.abort()
    expect((await run.result).stopReason).toBe('aborted')
    expect(fx.model.requests[0]!.signal.reason).toEqual({ kind: 'parent' })
    expect(turnEnds(childEvents(fx.host, run))).toEqual([{ kind: 'aborted', reason: { kind: 'parent' } }])
    await run.dispose()
  })

  it("§2 an abort right after start() resolves ends the turn aborted by the parent, with no output", async () => {
    const fx = setup(transport, [{ delayMs: 50, chunks: textResponse('too late') }])
    const controller = new AbortController()
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: controller.signal })
    controller.abort()
    expect(await run.result).toEqual({ output: [], stopReason: 'aborted' })
    const ends = turnEnds(childEvents(fx.host, run))
    expect(ends.length).toBeLessThanOrEqual(1)
    if (ends.length === 1) expect(ends[0]).toEqual({ kind: 'aborted', reason: { kind: 'parent' } })
    await run.dispose()
  })

  it('§2 an abort after the result settled changes nothing', async () => {
    const fx = setup(transport, [textResponse('done')])
    const controller = new AbortController()
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: controller.signal })
    expect(await run.result).toEqual({ output: [{ type: 'text', text: 'done' }], usage: { inputTokens: 0, outputTokens: 1 }, totalUsage: { inputTokens: 0, outputTokens: 1 }, stopReason: 'completed' })
    controller.abort()
    await run.dispose()
    expect(await run.result).toEqual({ output: [{ type: 'text', text: 'done' }], usage: { inputTokens: 0, outputTokens: 1 }, totalUsage: { inputTokens: 0, outputTokens: 1 }, stopReason: 'completed' })
  })
})

describe.each(TRANSPORTS)('§2 dispose [%s]', (transport) => {
  it('§2 dispose() is idempotent: repeated and concurrent calls all resolve', async () => {
    const fx = setup(transport, [textResponse('ok')])
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    await run.result
    const [a, b] = await Promise.all([run.dispose(), run.dispose()])
    expect(a).toBeUndefined()
    expect(b).toBeUndefined()
    await expect(run.dispose()).resolves.toBeUndefined()
    expect(fx.host.agents.get(run.id)).toBeUndefined()
  })

  it('§2 after dispose() resolves the child is gone from host.agents', async () => {
    const fx = setup(transport, [textResponse('ok')])
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    await run.result
    expect(fx.host.agents.get(run.id)).toBeDefined()
    await run.dispose()
    expect(fx.host.agents.get(run.id)).toBeUndefined()
    expect(fx.host.agents.list().map((a) => a.id)).toEqual([fx.parent.id])
  })

  it('§2 disposing a running child settles its result aborted, and dispose() waits for the result', async () => {
    const fx = setup(transport, ['hang'])
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    await fx.model.requested(1)
    let settled = false
    void run.result.then(() => (settled = true))
    await run.dispose()
    expect(settled).toBe(true)
    const result = await run.result
    expect(result.stopReason).toBe('aborted')
    expect(fx.model.requests[0]!.signal.aborted).toBe(true)
    expect(fx.host.agents.get(run.id)).toBeUndefined()
  })

  it('§2 disposing right after start() resolves settles the result aborted', async () => {
    const fx = setup(transport, [{ delayMs: 50, chunks: textResponse('too late') }])
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    await run.dispose()
    expect(await run.result).toEqual({ output: [], stopReason: 'aborted' })
    expect(fx.host.agents.get(run.id)).toBeUndefined()
  })

  it('§2 disposing a completed run leaves its result completed', async () => {
    const fx = setup(transport, [textResponse('kept')])
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    await run.result
    await run.dispose()
    expect(await run.result).toEqual({ output: [{ type: 'text', text: 'kept' }], usage: { inputTokens: 0, outputTokens: 1 }, totalUsage: { inputTokens: 0, outputTokens: 1 }, stopReason: 'completed' })
  })

  it("§2 dispose() removes the run's abort listener from the request signal", async () => {
    const fx = setup(transport, ['hang'])
    const controller = new AbortController()
    const before = getEventListeners(controller.signal, 'abort').length
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: controller.signal })
    await fx.model.requested(1)
    await run.dispose()
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(before)
    // aborting afterwards is harmless and does not touch the settled result
    const result = await run.result
    controller.abort()
    expect(await run.result).toBe(result)
  })

  it('§2 a run that settled on its own leaves no listener on the request signal after dispose', async () => {
    const fx = setup(transport, [textResponse('ok')])
    const controller = new AbortController()
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: controller.signal })
    await run.result
    await run.dispose()
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0)
  })

  it('§2 a disposed child leaves host.agents but its transcript stays in the store, complete', async () => {
    const store = createMemoryStore()
    const fx = setup(transport, [textResponse('for the record')], { store })
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    await run.result
    const events = structuredClone([...childEvents(fx.host, run)])
    await run.dispose()
    expect(fx.host.agents.get(run.id)).toBeUndefined()
    const stored = await store.read(run.id)
    expect(stored?.events).toEqual(events)
  })

  it('§2 disposing one child leaves a concurrent sibling running to completion', async () => {
    const fx = setup(transport, ['hang', { delayMs: 50, chunks: textResponse('sibling done') }])
    const first = await fx.host.spawn.start({ prompt: 'a', parent: fx.parent, signal: signal() })
    await fx.model.requested(1)
    const second = await fx.host.spawn.start({ prompt: 'b', parent: fx.parent, signal: signal() })
    await fx.model.requested(2)
    await first.dispose()
    expect((await first.result).stopReason).toBe('aborted')
    expect(await second.result).toEqual({ output: [{ type: 'text', text: 'sibling done' }], usage: { inputTokens: 0, outputTokens: 3 }, totalUsage: { inputTokens: 0, outputTokens: 3 }, stopReason: 'completed' })
    expect(fx.host.agents.get(second.id)).toBeDefined()
    await second.dispose()
  })
})
