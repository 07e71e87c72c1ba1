/**
 * CONTRACT.md §2a, the loop: what a turn is, how it ends, and how tool calls behave. Run against
 * delegated children (and, where the rule concerns plain agents, a top-level agent).
 */
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import {
  defineTool,
  maxTokensResponse,
  refusalResponse,
  STRUCTURED_OUTPUT_INSTRUCTION,
  textResponse,
  toolCallResponse,
  toolCallsResponse,
  type StreamChunk,
  type SubagentResult,
} from 'subagent-worker'
import { closeHosts, eventsOf, setup, shape, streamedRuns, tick, TRANSPORTS, types } from '../support/harness.js'
import { eventOf } from '../support/driver-helpers.js'
import { echoTool, gate, gatedTool, lastTurnEnd, runTopLevel, spawnChild, toolResults, turnEnds } from '../support/loop-helpers.js'

afterEach(closeHosts)

const TOOLS_MODULE = fileURLToPath(new URL('../fixtures/tools-module.mjs', import.meta.url))

/** The result without its optional, provider-authored diagnostic (checked to be a string when present). */
function withoutDiagnostic(result: SubagentResult): Omit<SubagentResult, 'diagnostic'> {
  const { diagnostic, ...rest } = result
  if (diagnostic !== undefined) expect(typeof diagnostic).toBe('string')
  return rest
}

const text = (t: string): StreamChunk => ({ type: 'text-delta', text: t })
const call = (id: string, name: string, args: string): StreamChunk => ({ type: 'tool-call', id, name, arguments: args })
const usage = (inputTokens: number, outputTokens: number): StreamChunk => ({ type: 'usage', inputTokens, outputTokens })

describe.each(TRANSPORTS)('§2a the loop [%s]', (transport) => {
  it('a turn runs turn/start, user/message, subagent/descriptor, then per step chunks, one message with usage, tool results, and one turn/end', async () => {
    const echo = echoTool()
    const fixture = setup(transport, [
      [text('Let me '), text('check.'), call('c1', 'echo', '{"text":"a"}'), usage(11, 7), { type: 'finish', reason: 'tool-calls' }],
      [text('All '), text('done.'), usage(20, 3), { type: 'finish', reason: 'stop' }],
    ])
    fixture.host.tools.register(echo.tool)
    const { events, result } = await spawnChild(fixture, { prompt: 'check a', label: 'order-test' })

    // How the text is split into chunks is free (a transport may merge deltas); its text is not.
    expect(shape(events)).toEqual([
      'turn/start',
      'user/message',
      'subagent/descriptor',
      'assistant/chunk',
      'assistant/message',
      'tool/result',
      'assistant/chunk',
      'assistant/message',
      'turn/end',
    ])
    expect(streamedRuns(events)).toEqual(['Let me check.', 'All done.'])
    const data = (type: string) => eventsOf(events, type)
    expect(events[0]!.data).toEqual({})
    expect(events[1]!.data).toEqual({ content: [{ type: 'text', text: 'check a' }], source: { kind: expect.any(String) } })
    expect(events[2]!.data).toEqual({ mode: 'one-shot', provider: 'spawn', label: 'order-test' })
    expect(data('assistant/message')).toEqual([
      {
        content: [
          { type: 'text', text: 'Let me check.' },
          { type: 'tool-call', id: 'c1', name: 'echo', arguments: '{"text":"a"}' },
        ],
        usage: { inputTokens: 11, outputTokens: 7 },
      },
      { content: [{ type: 'text', text: 'All done.' }], usage: { inputTokens: 20, outputTokens: 3 } },
    ])
    expect(data('tool/result')).toMatchObject([{ callId: 'c1', name: 'echo', isError: false, content: [{ type: 'text', text: 'echo:a' }] }])
    expect(events.at(-1)!.data).toEqual({ reason: { kind: 'completed' } })
    expect(echo.calls).toEqual([{ text: 'a' }])
    expect(fixture.model.requests).toHaveLength(2)
    expect(result).toEqual({ output: [{ type: 'text', text: 'All done.' }], usage: { inputTokens: 31, outputTokens: 10 }, totalUsage: { inputTokens: 31, outputTokens: 10 }, stopReason: 'completed' })
  })

  it('each model request carries the system prompt, the conversation, the visible tool schemas, maxTokens and an abort signal', async () => {
    const echo = echoTool('echo', { description: 'Echo it back.' })
    const fixture = setup(transport, [toolCallResponse('c1', 'echo', { text: 'x' }), textResponse('ok')])
    fixture.host.tools.register(echo.tool)
    await spawnChild(fixture, { prompt: 'hello child', agentOptions: { maxTokens: 321 } })

    const [first, second] = fixture.model.requests
    expect(fixture.model.requests).toHaveLength(2)
    for (const request of [first!, second!]) {
      expect(request.model).toBe('scripted-1')
      expect(typeof request.system).toBe('string')
      expect(request.system!.length).toBeGreaterThan(0)
      expect(request.maxTokens).toBe(321)
      expect(request.signal).toBeInstanceOf(AbortSignal)
      expect(request.tools).toEqual([{ name: 'echo', description: 'Echo it back.', parameters: echo.tool.parameters }])
    }
    expect(first!.messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'hello child' }] }])
    expect(second!.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool'])
    expect(second!.messages[2]).toMatchObject({ role: 'tool', callId: 'c1', name: 'echo', isError: false, content: [{ type: 'text', text: 'echo:x' }] })
  })

  it('the model is told of the agent module’s own tools whole, beside the host’s, step after step and child after child', async () => {
    const echo = echoTool('echo', { description: 'Echo it back.' })
    const fixture = setup(transport, [toolCallResponse('c1', 'lookup', { word: 'x' }), textResponse('ok'), textResponse('again')], { agentModule: TOOLS_MODULE })
    fixture.host.tools.register(echo.tool)
    const module = (await import(TOOLS_MODULE)).default as { tools: Array<{ name: string; description: string; parameters: object }> }
    const own = module.tools.map(({ name, description, parameters }) => ({ name, description, parameters }))
    await spawnChild(fixture)
    await spawnChild(fixture)
    expect(fixture.model.requests).toHaveLength(3)
    for (const request of fixture.model.requests) expect(request.tools).toEqual([{ name: 'echo', description: 'Echo it back.', parameters: echo.tool.parameters }, ...own])
    expect(fixture.model.requests[1]!.messages[2]).toMatchObject({ role: 'tool', name: 'lookup', isError: false, content: [{ type: 'text', text: 'x: found' }] })
  })

  it('the system prompt is built from ordered sections: persona (shadowing the deployment persona), then the delegation scope, then the tool-guidance band', async () => {
    // The delegation-scope text is the library's own wording: learn it from a plain child on a
    // host with no persona, where it is the only section.
    const bare = setup(transport, [textResponse('a')])
    await spawnChild(bare)
    const scope = bare.model.requests[0]!.system!
    expect(typeof scope).toBe('string')
    expect(scope.length).toBeGreaterThan(0)

    const fixture = setup(transport, [textResponse('b'), toolCallResponse('s1', 'structured_output', { answer: 'x' })], { persona: 'DEPLOYMENT PERSONA TEXT' })
    await spawnChild(fixture)
    const plain = fixture.model.requests[0]!.system!
    expect(plain.indexOf('DEPLOYMENT PERSONA TEXT')).toBe(0)
    expect(plain.indexOf(scope)).toBeGreaterThan(0)

    await spawnChild(fixture, {
      persona: 'CHILD PERSONA TEXT',
      outputSchema: { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] },
    })
    const system = fixture.model.requests[1]!.system!
    expect(system).not.toContain('DEPLOYMENT PERSONA TEXT')
    const persona = system.indexOf('CHILD PERSONA TEXT')
    const scopeAt = system.indexOf(scope)
    const instruction = system.indexOf(STRUCTURED_OUTPUT_INSTRUCTION)
    expect(persona).toBe(0)
    expect(scopeAt).toBeGreaterThan(persona)
    expect(instruction).toBeGreaterThan(scopeAt)
    expect(system.endsWith(STRUCTURED_OUTPUT_INSTRUCTION)).toBe(true)
  })

  it('streamed text is recorded as assistant/chunk text deltas, in order, and joined in the message', async () => {
    const fixture = setup(transport, [[text('Hel'), text('lo, '), text('world'), { type: 'finish', reason: 'stop' }]])
    const { events, result } = await spawnChild(fixture)
    // One run of text deltas, in order; a transport may merge them, so only their text is asserted.
    expect(streamedRuns(events)).toEqual(['Hello, world'])
    expect(eventsOf(events, 'assistant/message')).toEqual([{ content: [{ type: 'text', text: 'Hello, world' }] }])
    expect(result).toEqual({ output: [{ type: 'text', text: 'Hello, world' }], stopReason: 'completed' })
  })

  it('max-tokens: the step’s tool calls are never executed and its message keeps only its text', async () => {
    const echo = echoTool()
    const fixture = setup(transport, [
      [text('partial '), text('answer'), call('c1', 'echo', '{"text":"x"}'), usage(5, 9), { type: 'finish', reason: 'max-tokens' }],
      textResponse('never requested'),
    ])
    fixture.host.tools.register(echo.tool)
    const { events, result } = await spawnChild(fixture)

    expect(echo.calls).toEqual([])
    expect(toolResults(events)).toEqual([])
    expect(eventsOf(events, 'assistant/message')).toEqual([{ content: [{ type: 'text', text: 'partial answer' }], usage: { inputTokens: 5, outputTokens: 9 } }])
    expect(turnEnds(events)).toEqual([{ kind: 'max-tokens' }])
    expect(fixture.model.requests).toHaveLength(1)
    expect(withoutDiagnostic(result)).toEqual({ output: [{ type: 'text', text: 'partial answer' }], usage: { inputTokens: 5, outputTokens: 9 }, totalUsage: { inputTokens: 5, outputTokens: 9 }, stopReason: 'max-tokens' })
  })

  it('max-tokens with no text: the message is recorded with empty content and usage only', async () => {
    const echo = echoTool()
    // The cut-off arguments are not even valid JSON: they must never reach the tool.
    const fixture = setup(transport, [[call('c1', 'echo', '{"text":'), usage(3, 4), { type: 'finish', reason: 'max-tokens' }]])
    fixture.host.tools.register(echo.tool)
    const { events, result } = await spawnChild(fixture)

    expect(echo.calls).toEqual([])
    expect(toolResults(events)).toEqual([])
    expect(eventsOf(events, 'assistant/chunk')).toEqual([])
    expect(eventsOf(events, 'assistant/message')).toEqual([{ content: [], usage: { inputTokens: 3, outputTokens: 4 } }])
    expect(types(events).slice(-2)).toEqual(['assistant/message', 'turn/end'])
    expect(turnEnds(events)).toEqual([{ kind: 'max-tokens' }])
    expect(withoutDiagnostic(result)).toEqual({ output: [], usage: { inputTokens: 3, outputTokens: 4 }, totalUsage: { inputTokens: 3, outputTokens: 4 }, stopReason: 'max-tokens' })
  })

  it('a model refusal ends the turn blocked and the result is refusal', async () => {
    const fixture = setup(transport, [refusalResponse(), textResponse('never requested')])
    const { events, result } = await spawnChild(fixture)
    expect(turnEnds(events).map((r) => r.kind)).toEqual(['blocked'])
    expect(toolResults(events)).toEqual([])
    expect(fixture.model.requests).toHaveLength(1)
    expect(withoutDiagnostic(result)).toEqual({ output: [], stopReason: 'refusal' })
  })

  it('a beforeStep hook rejecting the step ends the turn blocked before any model request; the result is refusal', async () => {
    const fixture = setup(transport, [textResponse('never requested')])
    const { events, result } = await spawnChild(fixture, { agentOptions: { model: 'reject-step' } })
    expect(fixture.model.requests).toHaveLength(0)
    expect(types(events).slice(0, 2)).toEqual(['turn/start', 'user/message'])
    expect(types(events)).not.toContain('assistant/message')
    expect(types(events)).not.toContain('assistant/chunk')
    expect(types(events).at(-1)).toBe('turn/end')
    expect(turnEnds(events).map((r) => r.kind)).toEqual(['blocked'])
    expect(withoutDiagnostic(result)).toEqual({ output: [], stopReason: 'refusal' })
  })

  it('a failing model stream ends the turn error with a message', async () => {
    const fixture = setup(transport, [
      () => {
        throw new Error('upstream exploded')
      },
      textResponse('never requested'),
    ])
    const { events, result } = await spawnChild(fixture)
    expect(turnEnds(events)).toEqual([{ kind: 'error', message: expect.stringContaining('upstream exploded') }])
    expect(fixture.model.requests).toHaveLength(1)
    expect(withoutDiagnostic(result)).toEqual({ output: [], stopReason: 'error' })
  })

  it('a stream that ends without a finish chunk ends the turn error, whatever it streamed: it may be cut off', async () => {
    const fixture = setup(transport, [[text('half an ans'), call('c1', 'echo', '{"text":')], textResponse('never requested')])
    const { events, result } = await spawnChild(fixture)
    expect(turnEnds(events)).toEqual([{ kind: 'error', message: expect.stringContaining('ended without a finish chunk') }])
    // Nothing of the step is taken as a whole message, and its (perhaps truncated) call never runs.
    expect(types(events)).not.toContain('assistant/message')
    expect(types(events)).not.toContain('tool/result')
    expect(fixture.model.requests).toHaveLength(1)
    expect(result).toEqual({ output: [{ type: 'text', text: 'half an ans' }], stopReason: 'error', diagnostic: expect.stringContaining('ended without a finish chunk') })
  })

  it('no model registered under the provider name ends the turn error with a message', async () => {
    const fixture = setup(transport, [textResponse('never requested')])
    const { events, result, view } = await spawnChild(fixture, { agentOptions: { provider: 'no-such-model' } })
    expect(view.options.provider).toBe('no-such-model')
    expect(fixture.model.requests).toHaveLength(0)
    expect(turnEnds(events)).toEqual([{ kind: 'error', message: expect.stringContaining('no-such-model') }])
    expect(withoutDiagnostic(result)).toEqual({ output: [], stopReason: 'error' })
  })

  it('cancellation aborts the in-flight model request’s signal with the reason and ends the turn aborted with it', async () => {
    const fixture = setup(transport, ['hang', textResponse('never requested')])
    const controller = new AbortController()
    const run = await fixture.host.spawn.start({ prompt: 'wait', parent: fixture.parent, signal: controller.signal })
    await fixture.model.requested(1)
    await eventOf(run, 'assistant/chunk')
    expect(fixture.model.requests[0]!.signal.aborted).toBe(false)
    controller.abort('the caller’s own reason')
    const result = await run.result

    const signal = fixture.model.requests[0]!.signal
    expect(signal.aborted).toBe(true)
    expect(signal.reason).toBe('the caller’s own reason')
    const events = fixture.host.agents.get(run.id)!.session.events
    expect(turnEnds(events)).toEqual([{ kind: 'aborted', reason: 'the caller’s own reason' }])
    expect(fixture.model.requests).toHaveLength(1)
    expect(withoutDiagnostic(result)).toEqual({ output: [{ type: 'text', text: 'partial' }], stopReason: 'aborted' })
  })

  it('a host model that ignores the abort is let go: the child ends aborted at once and the model’s stream is told to return', async () => {
    const fixture = setup(transport)
    let toldToReturn!: () => void
    const returned = new Promise<void>((resolve) => (toldToReturn = resolve))
    // A stream that gives one chunk and then never answers, whatever its signal says.
    fixture.host.models.register('stubborn', {
      stream: () => {
        let pulls = 0
        const iterator: AsyncIterator<StreamChunk> = {
          next: () => (pulls++ === 0 ? Promise.resolve({ done: false, value: text('partial') }) : new Promise(() => {})),
          return: () => (toldToReturn(), Promise.resolve({ done: true, value: undefined })),
        }
        return { [Symbol.asyncIterator]: () => iterator }
      },
    })
    const controller = new AbortController()
    const run = await fixture.host.spawn.start({ prompt: 'wait', parent: fixture.parent, signal: controller.signal, agentOptions: { provider: 'stubborn' } })
    await eventOf(run, 'assistant/chunk')
    controller.abort('enough')
    expect(withoutDiagnostic(await run.result)).toEqual({ output: [{ type: 'text', text: 'partial' }], stopReason: 'aborted' })
    await returned
  })

  it('cancelling a top-level agent aborts its model request’s signal with the given reason', async () => {
    const fixture = setup(transport, ['hang'])
    fixture.parent.followup('wait')
    await fixture.model.requested(1)
    fixture.parent.cancel({ kind: 'user-stop', note: 'enough' })
    await fixture.parent.whenIdle()
    const signal = fixture.model.requests[0]!.signal
    expect(signal.aborted).toBe(true)
    expect(signal.reason).toEqual({ kind: 'user-stop', note: 'enough' })
    expect(turnEnds(fixture.parent.session.events)).toEqual([{ kind: 'aborted', reason: { kind: 'user-stop', note: 'enough' } }])
  })

  it('cancellation during a tool call ends the turn aborted with the reason and spends no further model request', async () => {
    const called = gate()
    const aborted = gate()
    const fixture = setup(transport, [toolCallResponse('w1', 'wait_for_abort', {}), textResponse('never requested')])
    fixture.host.tools.register(
      defineTool({
        name: 'wait_for_abort',
        description: 'Waits until cancelled.',
        parameters: { type: 'object', properties: {} },
        execute: (_args, exec) =>
          new Promise((_, reject) => {
            called.open()
            exec.signal.addEventListener('abort', () => (aborted.open(), reject(new Error('cancelled'))), { once: true })
          }),
      }),
    )
    const controller = new AbortController()
    const run = await fixture.host.spawn.start({ prompt: 'wait', parent: fixture.parent, signal: controller.signal })
    await called.promise
    controller.abort()
    const result = await run.result
    const events = fixture.host.agents.get(run.id)!.session.events
    expect(turnEnds(events)).toEqual([{ kind: 'aborted', reason: { kind: 'parent' } }])
    expect(types(events).at(-1)).toBe('turn/end')
    await aborted.promise
    expect(fixture.model.requests).toHaveLength(1)
    expect(result.stopReason).toBe('aborted')
  })

  it('tool calls of one step run concurrently up to maxParallelToolCalls, and results are appended in model order even when they finish out of order', async () => {
    const gated = gatedTool()
    const fixture = setup(
      transport,
      [
        toolCallsResponse([
          { id: 'a', name: 'gated', args: { tag: 'a' } },
          { id: 'b', name: 'gated', args: { tag: 'b' } },
          { id: 'c', name: 'gated', args: { tag: 'c' } },
          { id: 'd', name: 'gated', args: { tag: 'd' } },
        ]),
        textResponse('all done'),
      ],
      { maxParallelToolCalls: 2 },
    )
    fixture.host.tools.register(gated.tool)
    const run = await fixture.host.spawn.start({ prompt: 'go', parent: fixture.parent, signal: new AbortController().signal })

    await gated.until('two calls to start', (state) => state.started.length >= 2)
    await tick(50) // a third call must not start while two are running
    expect(gated.state.started.length).toBe(2)
    expect([...gated.state.started].sort()).toEqual(['a', 'b'])
    // Finish them in an order unlike the model's: b first, a last.
    gated.release('b')
    await gated.until('a third call to start', (state) => state.started.length >= 3)
    await tick(20)
    expect(gated.state.started.length).toBe(3)
    gated.release(gated.state.started[2]!)
    await gated.until('the fourth call to start', (state) => state.started.length >= 4)
    gated.release(gated.state.started[3]!)
    await gated.until('three calls to finish', (state) => state.finished.length >= 3)
    gated.release('a')
    const result = await run.result
    const events = fixture.host.agents.get(run.id)!.session.events

    expect(gated.state.peak).toBe(2)
    expect(gated.state.finished[0]).toBe('b')
    expect(gated.state.finished.at(-1)).toBe('a')
    expect(toolResults(events).map((r) => [r.callId, r.isError, r.content])).toEqual([
      ['a', false, [{ type: 'text', text: 'done:a' }]],
      ['b', false, [{ type: 'text', text: 'done:b' }]],
      ['c', false, [{ type: 'text', text: 'done:c' }]],
      ['d', false, [{ type: 'text', text: 'done:d' }]],
    ])
    expect(fixture.model.requests[1]!.messages.filter((m) => m.role === 'tool').map((m) => (m as { callId: string }).callId)).toEqual(['a', 'b', 'c', 'd'])
    expect(result).toEqual({ output: [{ type: 'text', text: 'all done' }], usage: { inputTokens: 0, outputTokens: 2 }, totalUsage: { inputTokens: 0, outputTokens: 2 }, stopReason: 'completed' })
  })

  it('a tool calling concludeTurn completes the turn after the step’s results, with no further model request', async () => {
    const echo = echoTool()
    const fixture = setup(transport, [
      toolCallsResponse([
        { id: 'f1', name: 'finish', args: {} },
        { id: 'e1', name: 'echo', args: { text: 'sibling' } },
      ]),
      textResponse('never requested'),
    ])
    fixture.host.tools.register(echo.tool)
    fixture.host.tools.register(
      defineTool({
        name: 'finish',
        description: 'Ends the turn.',
        parameters: { type: 'object', properties: {} },
        execute(_args, exec) {
          exec.concludeTurn()
          return 'finished'
        },
      }),
    )
    const { events, result } = await spawnChild(fixture)
    expect(fixture.model.requests).toHaveLength(1)
    expect(fixture.model.remaining).toBe(1)
    expect(toolResults(events).map((r) => [r.callId, r.isError, r.content])).toEqual([
      ['f1', false, [{ type: 'text', text: 'finished' }]],
      ['e1', false, [{ type: 'text', text: 'echo:sibling' }]],
    ])
    expect(types(events).slice(-3)).toEqual(['tool/result', 'tool/result', 'turn/end'])
    expect(turnEnds(events)).toEqual([{ kind: 'completed' }])
    expect(result.stopReason).toBe('completed')
  })

  it('an unknown tool gives an UNKNOWN_TOOL error result and the turn goes on', async () => {
    const fixture = setup(transport, [toolCallResponse('u1', 'no_such_tool', {}), textResponse('recovered')])
    const { events, result } = await spawnChild(fixture)
    expect(toolResults(events)).toEqual([expect.objectContaining({ callId: 'u1', name: 'no_such_tool', isError: true, code: 'UNKNOWN_TOOL' })])
    expect(fixture.model.requests).toHaveLength(2)
    expect(result).toEqual({ output: [{ type: 'text', text: 'recovered' }], usage: { inputTokens: 0, outputTokens: 4 }, totalUsage: { inputTokens: 0, outputTokens: 4 }, stopReason: 'completed' })
  })

  it('a tool denied by toolFilter vanishes from the request and refuses to execute with UNKNOWN_TOOL', async () => {
    const alpha = echoTool('alpha')
    const beta = echoTool('beta')
    const fixture = setup(transport, [toolCallResponse('b1', 'beta', { text: 'x' }), textResponse('ok'), textResponse('parent')])
    fixture.host.tools.register(alpha.tool)
    fixture.host.tools.register(beta.tool)
    const { events, result } = await spawnChild(fixture, { toolFilter: { deny: ['beta'] } })

    for (const request of fixture.model.requests) expect(request.tools?.map((t) => t.name)).toEqual(['alpha'])
    expect(beta.calls).toEqual([])
    expect(toolResults(events)).toEqual([expect.objectContaining({ callId: 'b1', name: 'beta', isError: true, code: 'UNKNOWN_TOOL' })])
    expect(result).toEqual({ output: [{ type: 'text', text: 'ok' }], usage: { inputTokens: 0, outputTokens: 4 }, totalUsage: { inputTokens: 0, outputTokens: 4 }, stopReason: 'completed' })

    // The restriction belongs to the child alone.
    await runTopLevel(fixture.parent)
    expect(fixture.model.requests[2]!.tools?.map((t) => t.name).sort()).toEqual(['alpha', 'beta'])
  })

  it('a tool outside toolFilter.allow vanishes from the request and refuses to execute with UNKNOWN_TOOL', async () => {
    const alpha = echoTool('alpha')
    const beta = echoTool('beta')
    const fixture = setup(transport, [
      toolCallsResponse([
        { id: 'a1', name: 'alpha', args: { text: 'yes' } },
        { id: 'b1', name: 'beta', args: { text: 'no' } },
      ]),
      textResponse('ok'),
    ])
    fixture.host.tools.register(alpha.tool)
    fixture.host.tools.register(beta.tool)
    const { events } = await spawnChild(fixture, { toolFilter: { allow: ['alpha'] } })

    for (const request of fixture.model.requests) expect(request.tools?.map((t) => t.name)).toEqual(['alpha'])
    expect(alpha.calls).toEqual([{ text: 'yes' }])
    expect(beta.calls).toEqual([])
    expect(toolResults(events).map((r) => [r.callId, r.isError, r.code])).toEqual([
      ['a1', false, undefined],
      ['b1', true, 'UNKNOWN_TOOL'],
    ])
  })

  it('arguments failing the tool’s schema, or not JSON at all, give INVALID_ARGS without running the tool', async () => {
    const echo = echoTool()
    const fixture = setup(transport, [
      toolCallsResponse([
        { id: 'i1', name: 'echo', args: { text: 5 } },
        { id: 'i2', name: 'echo', args: '{"text": "unterminated' },
        { id: 'i3', name: 'echo', args: { text: 'ok', extra: true } },
        { id: 'i4', name: 'echo', args: {} },
        { id: 'v1', name: 'echo', args: { text: 'valid' } },
      ]),
      textResponse('done'),
    ])
    fixture.host.tools.register(echo.tool)
    const { events, result } = await spawnChild(fixture)
    expect(toolResults(events).map((r) => [r.callId, r.isError, r.code])).toEqual([
      ['i1', true, 'INVALID_ARGS'],
      ['i2', true, 'INVALID_ARGS'],
      ['i3', true, 'INVALID_ARGS'],
      ['i4', true, 'INVALID_ARGS'],
      ['v1', false, undefined],
    ])
    expect(echo.calls).toEqual([{ text: 'valid' }])
    expect(fixture.model.requests).toHaveLength(2)
    expect(result.stopReason).toBe('completed')
  })

  it('a tool that throws gives a FAILED error result and the turn goes on', async () => {
    const fixture = setup(transport, [toolCallResponse('x1', 'explode', {}), textResponse('went on')])
    fixture.host.tools.register(
      defineTool({
        name: 'explode',
        description: 'Always throws.',
        parameters: { type: 'object', properties: {} },
        execute() {
          throw new Error('kaboom')
        },
      }),
    )
    const { events, result } = await spawnChild(fixture)
    const [failed] = toolResults(events)
    expect(toolResults(events)).toHaveLength(1)
    expect(failed).toMatchObject({ callId: 'x1', name: 'explode', isError: true, code: 'FAILED' })
    expect(failed!.content.map((b) => b.text).join('')).toContain('kaboom')
    expect(fixture.model.requests).toHaveLength(2)
    expect(turnEnds(events)).toEqual([{ kind: 'completed' }])
    expect(result).toEqual({ output: [{ type: 'text', text: 'went on' }], usage: { inputTokens: 0, outputTokens: 3 }, totalUsage: { inputTokens: 0, outputTokens: 3 }, stopReason: 'completed' })
  })

  it('a needsApproval tool called by a delegated child is DENIED and never runs', async () => {
    const guarded = echoTool('guarded', { needsApproval: true })
    const fixture = setup(transport, [toolCallResponse('g1', 'guarded', { text: 'please' }), textResponse('reported the limit')])
    fixture.host.tools.register(guarded.tool)
    const { events, result } = await spawnChild(fixture)
    expect(guarded.calls).toEqual([])
    expect(toolResults(events)).toEqual([expect.objectContaining({ callId: 'g1', name: 'guarded', isError: true, code: 'DENIED' })])
    expect(fixture.model.requests).toHaveLength(2)
    expect(result).toEqual({ output: [{ type: 'text', text: 'reported the limit' }], usage: { inputTokens: 0, outputTokens: 10 }, totalUsage: { inputTokens: 0, outputTokens: 10 }, stopReason: 'completed' })
  })

  it('a needsApproval tool called by a top-level agent runs (asking is the application’s business)', async () => {
    const guarded = echoTool('guarded', { needsApproval: true })
    const fixture = setup(transport, [toolCallResponse('g1', 'guarded', { text: 'please' }), textResponse('done')])
    fixture.host.tools.register(guarded.tool)
    const events = await runTopLevel(fixture.parent)
    expect(guarded.calls).toEqual([{ text: 'please' }])
    expect(toolResults(events)).toEqual([expect.objectContaining({ callId: 'g1', name: 'guarded', isError: false, content: [{ type: 'text', text: 'echo:please' }] })])
    expect(lastTurnEnd(events)).toEqual({ kind: 'completed' })
  })

  it('a top-level agent’s turn has the same shape without a descriptor', async () => {
    const fixture = setup(transport, [textResponse('hi there')])
    const events = await runTopLevel(fixture.parent, 'hello')
    expect(types(events)).toEqual(['turn/start', 'user/message', 'assistant/chunk', 'assistant/message', 'turn/end'])
    expect(eventsOf(events, 'user/message')[0]).toMatchObject({ content: [{ type: 'text', text: 'hello' }] })
    expect(lastTurnEnd(events)).toEqual({ kind: 'completed' })
  })
})
