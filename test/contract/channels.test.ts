/**
 * CONTRACT.md §12: the host publishes each child's start and end, each model request and each
 * tool call on `node:diagnostics_channel`, in its own thread, whatever the transport; nothing is
 * published while a channel has no subscriber.
 */
import diagnostics_channel from 'node:diagnostics_channel'
import { afterEach, describe, expect, it } from 'vitest'
import { fileURLToPath } from 'node:url'
import { createSubagentTool, defineTool, refusalResponse, textResponse, toolCallResponse, toolCallsResponse } from 'subagent-worker'
import type { ChildEndMessage, ChildStartMessage, StepMessage, StreamChunk, ToolMessage } from 'subagent-worker'
import { closeHosts, setup, signal, TRANSPORTS } from '../support/harness.js'
import { eventOf } from '../support/driver-helpers.js'
import { heldUntilMoved } from '../support/moves.js'

const FAULT_MODULE = fileURLToPath(new URL('../fixtures/fault-module.mjs', import.meta.url))

const NAMES = ['subagent-worker:child:start', 'subagent-worker:child:end', 'subagent-worker:step', 'subagent-worker:tool'] as const

interface Heard {
  starts: ChildStartMessage[]
  ends: ChildEndMessage[]
  steps: StepMessage[]
  tools: ToolMessage[]
  /** Every message on any of the four, in the order published. */
  all: Array<{ name: string; message: unknown }>
}

const unsubscribe: Array<() => void> = []
afterEach(async () => {
  for (const off of unsubscribe.splice(0)) off()
  await closeHosts()
})

/** Real subscribers on the four channels, removed after the test. */
function listen(): Heard {
  const heard: Heard = { starts: [], ends: [], steps: [], tools: [], all: [] }
  const lists = [heard.starts, heard.ends, heard.steps, heard.tools] as unknown[][]
  NAMES.forEach((name, i) => {
    const onMessage = (message: unknown) => {
      lists[i]!.push(message)
      heard.all.push({ name, message })
    }
    diagnostics_channel.subscribe(name, onMessage)
    unsubscribe.push(() => diagnostics_channel.unsubscribe(name, onMessage))
  })
  return heard
}

describe.each(TRANSPORTS)('%s transport: diagnostics channels', (transport) => {
  it('a child with a tool call: child:start, two steps, one tool call, child:end, with times in order', async () => {
    const { host, parent } = setup(transport, [
      toolCallResponse('c1', 'echo', { text: 'hi' }, 'calling echo'),
      textResponse('all done'),
    ])
    host.tools.register(defineTool({ name: 'echo', description: 'Echoes.', parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] }, execute: ({ text }) => `echo: ${text}` }))
    const heard = listen()
    const run = await host.spawn.start({ prompt: 'go', parent, signal: signal(), label: 'echoer', agentOptions: { model: 'scripted-1' } })
    const result = await run.result
    await run.dispose()
    expect(result.stopReason).toBe('completed')

    const child = { runId: run.id, id: run.id, parentId: parent.id, depth: 1, label: 'echoer', provider: 'spawn', transport, modelProvider: 'scripted', model: 'scripted-1' }
    expect(heard.starts).toEqual([{ ...child, startTime: expect.any(Number) }])
    expect(heard.ends).toEqual([{ ...child, startTime: heard.starts[0]!.startTime, endTime: expect.any(Number), stopReason: 'completed', usage: result.usage, totalUsage: result.usage }])
    expect(heard.steps.map((s) => [s.phase, s.step, s.finishReason])).toEqual([
      ['start', 1, undefined],
      ['end', 1, 'tool-calls'],
      ['start', 2, undefined],
      ['end', 2, 'stop'],
    ])
    expect(heard.steps[1]).toMatchObject({ ...child, usage: { inputTokens: expect.any(Number), outputTokens: expect.any(Number) }, output: [{ type: 'text', text: 'calling echo' }, { type: 'tool-call', id: 'c1', name: 'echo', arguments: '{"text":"hi"}' }] })
    expect(heard.tools).toEqual([
      { ...child, phase: 'start', callId: 'c1', name: 'echo', arguments: '{"text":"hi"}', startTime: expect.any(Number) },
      { ...child, phase: 'end', callId: 'c1', name: 'echo', arguments: '{"text":"hi"}', startTime: heard.tools[0]!.startTime, endTime: expect.any(Number), isError: false, result: [{ type: 'text', text: 'echo: hi' }] },
    ])
    // One clock, in the order things happened: step 1, the call, step 2, inside the child's life.
    const [s1, e1, s2, e2] = heard.steps
    const [t1, t2] = heard.tools
    const times = [heard.starts[0]!.startTime, s1!.startTime, e1!.endTime, t1!.startTime, t2!.endTime, s2!.startTime, e2!.endTime, heard.ends[0]!.endTime]
    expect(times).toEqual([...times].sort((a, b) => a! - b!))
    expect(e1!.startTime).toBe(s1!.startTime)
    expect(s2!.startTime).toBe(t2!.endTime)
    expect(heard.all.map((m) => m.name)).toEqual([NAMES[0], NAMES[2], NAMES[2], NAMES[3], NAMES[3], NAMES[2], NAMES[2], NAMES[1]])
  })

  // CONTRACT.md §2a: two calls of one step with the same id are two runs, each with its own result.
  it('two calls of one step sharing an id are two tool calls: each start has its own end, and the next step starts at the last result', async () => {
    const { host, parent } = setup(transport, [toolCallsResponse([{ id: 'd', name: 'count', args: { n: 1 } }, { id: 'd', name: 'count', args: { n: 2 } }]), textResponse('done')])
    host.tools.register(defineTool({ name: 'count', description: 'Counts.', parameters: { type: 'object', properties: { n: { type: 'number' } } }, execute: ({ n }: { n: number }) => `run ${n}` }))
    const heard = listen()
    const run = await host.spawn.start({ prompt: 'go', parent, signal: signal() })
    expect((await run.result).stopReason).toBe('completed')
    await run.dispose()
    // A result ends the oldest open call of its id; the results come in the calls' order (parity.test.ts).
    expect(heard.tools.map((t) => [t.phase, t.callId, t.arguments, t.result])).toEqual([
      ['start', 'd', '{"n":1}', undefined],
      ['start', 'd', '{"n":2}', undefined],
      ['end', 'd', '{"n":1}', [{ type: 'text', text: 'run 1' }]],
      ['end', 'd', '{"n":2}', [{ type: 'text', text: 'run 2' }]],
    ])
    const [start1, start2, end1, end2] = heard.tools
    expect([end1!.startTime, end2!.startTime]).toEqual([start1!.startTime, start2!.startTime])
    expect(end2!.endTime).toBeGreaterThanOrEqual(end1!.endTime!)
    expect(heard.steps.map((s) => [s.phase, s.step])).toEqual([['start', 1], ['end', 1], ['start', 2], ['end', 2]])
    expect(heard.steps[2]!.startTime).toBe(end2!.endTime)
  })

  it("a step's end says how the model finished: cut off by its token cap, 'max-tokens'; refused, 'refusal'", async () => {
    const cut: StreamChunk[] = [{ type: 'text-delta', text: 'cut' }, { type: 'finish', reason: 'max-tokens' }]
    const { host, parent } = setup(transport, [cut, refusalResponse('no')])
    const heard = listen()
    for (const prompt of ['go on and on', 'do something refused']) {
      const run = await host.spawn.start({ prompt, parent, signal: signal() })
      await run.result
      await run.dispose()
    }
    expect(heard.steps.filter((s) => s.phase === 'end').map((s) => [s.finishReason, s.error])).toEqual([
      ['max-tokens', undefined],
      ['refusal', undefined],
    ])
  })

  // CONTRACT.md §11: the request beyond a step or token limit is not made, so no step is published for it.
  // The step that spends the token budget ends the turn with its calls cancelled (limits.test.ts); a step limit lets them run.
  it.for([
    ['maxSteps', { maxSteps: 1 }, { isError: false }],
    ['maxTotalTokens', { maxTotalTokens: 1 }, { isError: true, code: 'ABORTED' }],
  ] as const)('a turn a %s limit ends publishes the steps its model was asked for, and none for the request it refused', async ([limit, limits, callEnd]) => {
    const { host, parent, model } = setup(transport, [toolCallResponse('c1', 'echo', { text: 'hi' }), textResponse('never asked')])
    host.tools.register(defineTool({ name: 'echo', description: 'Echoes.', parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] }, execute: ({ text }) => `echo: ${text}` }))
    const heard = listen()
    const run = await host.spawn.start({ prompt: 'go', parent, signal: signal(), limits })
    expect(await run.result).toMatchObject({ stopReason: 'aborted', diagnostic: expect.stringContaining(`limits.${limit}`) })
    await run.dispose()
    expect(model.requests).toHaveLength(1)
    expect(heard.steps.map((s) => [s.phase, s.step, s.finishReason, s.error])).toEqual([
      ['start', 1, undefined, undefined],
      ['end', 1, 'tool-calls', undefined],
    ])
    expect(heard.tools).toEqual([
      expect.objectContaining({ phase: 'start', callId: 'c1' }),
      expect.objectContaining({ phase: 'end', callId: 'c1', ...callEnd }),
    ])
  })

  it('a child cancelled while its tool runs publishes no step for a request its loop never made', async () => {
    const { host, parent, model } = setup(transport, [toolCallResponse('c1', 'wait', {}), textResponse('never asked')])
    let running!: () => void
    const called = new Promise<void>((resolve) => (running = resolve))
    host.tools.register(
      defineTool({
        name: 'wait',
        description: 'Waits for its cancel.',
        parameters: { type: 'object', properties: {} },
        execute: (_args, { signal }) => new Promise((resolve) => (running(), signal.addEventListener('abort', () => resolve('stopped'), { once: true }))),
      }),
    )
    const heard = listen()
    const controller = new AbortController()
    const run = await host.spawn.start({ prompt: 'go', parent, signal: controller.signal })
    await called
    controller.abort()
    expect((await run.result).stopReason).toBe('aborted')
    await run.dispose()
    expect(model.requests).toHaveLength(1)
    expect(heard.steps.map((s) => [s.phase, s.step, s.finishReason, s.error])).toEqual([
      ['start', 1, undefined, undefined],
      ['end', 1, 'tool-calls', undefined],
    ])
  })

  it("a module model's request that fails before its first output is a step ended error, wherever the model runs", async () => {
    const { host, parent } = setup(transport, [], { agentModule: FAULT_MODULE })
    const heard = listen()
    const run = await host.spawn.start({ prompt: 'go', parent, signal: signal(), agentOptions: { provider: 'fail-at-once' } })
    expect(await run.result).toMatchObject({ stopReason: 'error', diagnostic: expect.stringContaining('the model failed before answering') })
    await run.dispose()
    expect(heard.steps.map((s) => [s.phase, s.step, s.error])).toEqual([
      ['start', 1, undefined],
      ['end', 1, 'error'],
    ])
  })

  it('a child whose model is not registered publishes no step: no request was made', async () => {
    const { host, parent } = setup(transport)
    const heard = listen()
    const run = await host.spawn.start({ prompt: 'go', parent, signal: signal(), agentOptions: { provider: 'nowhere' } })
    expect((await run.result).stopReason).toBe('error')
    await run.dispose()
    expect(heard.steps).toEqual([])
    expect(heard.ends).toHaveLength(1)
  })

  it('a step whose request was made and cancelled before its first output is still published, ended aborted', async () => {
    const { host, parent } = setup(transport)
    let asked!: () => void
    const requested = new Promise<void>((resolve) => (asked = resolve))
    host.models.register('silent', {
      async *stream(request) {
        asked()
        await new Promise((resolve) => (request.signal?.aborted ? resolve(undefined) : request.signal?.addEventListener('abort', resolve, { once: true })))
      },
    })
    const heard = listen()
    const controller = new AbortController()
    const run = await host.spawn.start({ prompt: 'wait', parent, signal: controller.signal, agentOptions: { provider: 'silent' } })
    await requested
    controller.abort()
    expect((await run.result).stopReason).toBe('aborted')
    await run.dispose()
    expect(heard.steps.map((s) => [s.phase, s.step, s.error])).toEqual([
      ['start', 1, undefined],
      ['end', 1, 'aborted'],
    ])
  })

  // A move needs a runner the child can leave: two children on one thread or process. A request
  // cut off before its first chunk was made all the same (the host served it): a step too.
  it.skipIf(transport !== 'worker' && transport !== 'process').for([
    ['while its request streams', 'before the move '],
    ['before its host model sent anything', ''],
  ] as const)("a child moved %s: that step ends with error 'moved', and the request made again is a step of its own", async ([, first]) => {
    const { host, parent } = setup(transport, [toolCallResponse('c1', 'exit', { code: 7 })], { agentModule: FAULT_MODULE, pool: { minThreads: 1, maxThreads: 1, childrenPerWorker: 2 } })
    const held = heldUntilMoved(first, 'after the move')
    host.models.register('held', held)
    const heard = listen()
    const mate = await host.spawn.start({ prompt: 'wait', parent, signal: signal(), agentOptions: { provider: 'held' } })
    await (first === '' ? held.requested : eventOf(mate, 'assistant/chunk'))
    const crasher = await host.spawn.start({ prompt: 'crash', parent, signal: signal() })
    expect((await crasher.result).stopReason).toBe('error')
    expect(await mate.result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'after the move' }] })
    expect(held.requests()).toBe(2)
    expect(heard.steps.filter((s) => s.id === mate.id).map((s) => [s.phase, s.step, s.finishReason, s.error])).toEqual([
      ['start', 1, undefined, undefined],
      ['end', 1, undefined, 'moved'],
      ['start', 2, undefined, undefined],
      ['end', 2, 'stop', undefined],
    ])
    await mate.dispose()
    await crasher.dispose()
  })

  it("a nested child's child:start names its parent and the tool call that started it", async () => {
    const { host, parent } = setup(transport, [
      toolCallResponse('outer', 'subagent', { description: 'middle', prompt: 'delegate on' }),
      toolCallResponse('inner', 'subagent', { description: 'leaf', prompt: 'answer' }),
      textResponse('leaf answer'),
      textResponse('middle answer'),
      textResponse('top answer'),
    ])
    host.tools.register(createSubagentTool(host, { provider: 'spawn', maxDepth: 3 }))
    const heard = listen()
    const run = await host.spawn.start({ prompt: 'go', parent, signal: signal(), label: 'top' })
    expect((await run.result).stopReason).toBe('completed')
    await run.dispose()
    const [top, middle, leaf] = heard.starts
    expect(top).toMatchObject({ id: run.id, parentId: parent.id, depth: 1 })
    expect(top).not.toHaveProperty('parentCallId')
    expect(middle).toMatchObject({ parentId: run.id, depth: 2, label: 'middle', parentCallId: 'outer' })
    expect(leaf).toMatchObject({ parentId: middle!.id, depth: 3, label: 'leaf', parentCallId: 'inner' })
    // The calls that started them are open while they run, and end after they do.
    const outerEnd = heard.all.findIndex((m) => m.name === NAMES[3] && (m.message as ToolMessage).callId === 'outer' && (m.message as ToolMessage).phase === 'end')
    const middleEnd = heard.all.findIndex((m) => m.name === NAMES[1] && (m.message as ChildEndMessage).id === middle!.id)
    expect(middleEnd).toBeGreaterThan(-1)
    expect(outerEnd).toBeGreaterThan(middleEnd)
  })
})

describe('diagnostics channels without subscribers', () => {
  it('publish nothing', async () => {
    const channels = NAMES.map((name) => diagnostics_channel.channel(name))
    expect(channels.map((c) => c.hasSubscribers)).toEqual([false, false, false, false])
    // Counts calls on the real channel objects: with no subscriber, the host must not call publish.
    let published = 0
    const originals = channels.map((c) => c.publish)
    channels.forEach((c) => (c.publish = () => void published++))
    try {
      const { host, parent } = setup('inline', [toolCallResponse('c1', 'echo', { text: 'x' }), textResponse('done')])
      host.tools.register(defineTool({ name: 'echo', description: 'Echoes.', parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] }, execute: ({ text }) => text }))
      expect((await host.spawn.run({ prompt: 'go', parent, signal: signal() })).stopReason).toBe('completed')
    } finally {
      channels.forEach((c, i) => (c.publish = originals[i]!))
    }
    expect(published).toBe(0)
  })
})
