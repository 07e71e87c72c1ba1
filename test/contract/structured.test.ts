/**
 * CONTRACT.md §4, structured output: the child-only tool and instruction, two-phase commit,
 * terminal capture, and how captures map to results. Plain agents never see any of it.
 */
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import {
  createHost,
  createMemoryStore,
  defineAgentModule,
  defineTool,
  STRUCTURED_OUTPUT_ACK,
  STRUCTURED_OUTPUT_DESCRIPTION,
  STRUCTURED_OUTPUT_INSTRUCTION,
  STRUCTURED_OUTPUT_TOOL,
  textResponse,
  toolCallResponse,
  toolCallsResponse,
  type ModelRequest,
  type SubagentResult,
} from 'subagent-worker'
import { closeHosts, setup, signal, TRANSPORTS, types } from '../support/harness.js'
import { eventOf } from '../support/driver-helpers.js'
import { echoTool, runTopLevel, spawnChild, toolResults, turnEnds } from '../support/loop-helpers.js'

afterEach(closeHosts)

const SO = 'structured_output'

const DESCRIPTION =
  "Report your final structured result. Call this exactly once, when your answer is complete; the arguments must match this tool's parameter schema exactly."
const INSTRUCTION =
  'When you have your final answer, you MUST report it by calling the `structured_output` tool with arguments matching its parameter schema exactly. Do not finish with a plain text answer: only the tool call counts as your result.'
const ACK = 'Structured output recorded.'
const alreadyRecorded = (tool: string) => `structured output already recorded: the run is complete, so \`${tool}\` is not executed`

/** `veto: true` makes the contract module's afterTool hook turn the call into an error; `tamper: true` makes it change the call's arguments in place. */
const SCHEMA = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  description: 'The final report.',
  properties: {
    answer: { type: 'string', description: 'The answer.' },
    items: { type: 'array', items: { type: 'integer' } },
    veto: { type: 'boolean' },
    tamper: { type: 'boolean' },
  },
  required: ['answer'],
  additionalProperties: false,
}

const PERMISSIVE_MODULE = fileURLToPath(new URL('../fixtures/permissive-module.mjs', import.meta.url))

function withoutDiagnostic(result: SubagentResult): Omit<SubagentResult, 'diagnostic'> {
  const { diagnostic, ...rest } = result
  if (diagnostic !== undefined) expect(typeof diagnostic).toBe('string')
  return rest
}

const toolNames = (request: ModelRequest) => (request.tools ?? []).map((t) => t.name)
const callBlock = (id: string, args: unknown) => ({ type: 'tool-call', id, name: SO, arguments: JSON.stringify(args) })

describe('§4 structured output: exported texts', () => {
  it('exports the exact tool name, description, instruction and acknowledgement', () => {
    expect(STRUCTURED_OUTPUT_TOOL).toBe('structured_output')
    expect(STRUCTURED_OUTPUT_DESCRIPTION).toBe(DESCRIPTION)
    expect(STRUCTURED_OUTPUT_INSTRUCTION).toBe(INSTRUCTION)
    expect(STRUCTURED_OUTPUT_ACK).toBe(ACK)
  })

  it("a caller's tool may not take the name structured_output: the host's registry and an agent module refuse it", () => {
    const impostor = defineTool({ name: SO, description: 'not the runtime', parameters: { type: 'object' }, execute: () => 'ran' })
    const host = createHost()
    expect(() => host.tools.register(impostor)).toThrow(
      'host.tools.register: the tool name "structured_output" is reserved for structured output (a child started with outputSchema gets it): give this tool another name',
    )
    expect(host.tools.get(SO)).toBeUndefined()
    expect(() => defineAgentModule({ tools: [impostor] })).toThrow(/^agent module: the tool name "structured_output" is reserved/)
    return host.close()
  })
})

describe.each(TRANSPORTS)('§4 structured output [%s]', (transport) => {
  it('the child gets a structured_output tool with the exact description and exactly the requested schema as parameters', async () => {
    const fixture = setup(transport, [toolCallResponse('s1', SO, { answer: 'x' })])
    fixture.host.tools.register(echoTool().tool)
    const schema = structuredClone(SCHEMA)
    await spawnChild(fixture, { outputSchema: schema })
    const tools = fixture.model.requests[0]!.tools!
    expect(tools.filter((t) => t.name === SO)).toEqual([{ name: SO, description: DESCRIPTION, parameters: SCHEMA }])
    expect(toolNames(fixture.model.requests[0]!).sort()).toEqual(['echo', SO])
    expect(schema).toEqual(SCHEMA) // the caller's schema is left as it was
  })

  it('the instruction is the last system section (order 190), after the persona and the delegation scope', async () => {
    const fixture = setup(transport, [textResponse('plain'), toolCallResponse('s1', SO, { answer: 'x' })])
    // A plain child on a host with no persona: its system prompt is the delegation scope alone.
    await spawnChild(fixture)
    const scope = fixture.model.requests[0]!.system!
    expect(scope).not.toContain(INSTRUCTION)

    await spawnChild(fixture, { persona: 'You are the Careful Reporter.', outputSchema: SCHEMA })
    const system = fixture.model.requests[1]!.system!
    expect(system.endsWith(INSTRUCTION)).toBe(true)
    expect(system.split(INSTRUCTION)).toHaveLength(2) // exactly once
    const at = system.indexOf(INSTRUCTION)
    expect(system.indexOf('You are the Careful Reporter.')).toBeGreaterThanOrEqual(0)
    expect(system.indexOf('You are the Careful Reporter.')).toBeLessThan(at)
    expect(system.indexOf(scope)).toBeGreaterThanOrEqual(0)
    expect(system.indexOf(scope)).toBeLessThan(at)
  })

  it('a plain agent’s request never carries the structured_output tool or the instruction (top-level and child, even beside a structured sibling)', async () => {
    const respond = (request: ModelRequest) =>
      toolNames(request).includes(SO) ? toolCallResponse('s1', SO, { answer: 'from the structured child' }) : textResponse('plain')
    const fixture = setup(transport, [respond, respond, respond])
    fixture.host.tools.register(echoTool().tool)
    const [structured, plain] = await Promise.all([
      spawnChild(fixture, { prompt: 'structured sibling', outputSchema: SCHEMA }),
      spawnChild(fixture, { prompt: 'plain sibling' }),
    ])
    expect(structured.result.structured).toEqual({ answer: 'from the structured child' })
    expect(plain.result).toEqual({ output: [{ type: 'text', text: 'plain' }], usage: { inputTokens: 0, outputTokens: 2 }, totalUsage: { inputTokens: 0, outputTokens: 2 }, stopReason: 'completed' })
    await runTopLevel(fixture.parent, 'top-level')

    const byPrompt = (prompt: string) =>
      fixture.model.requests.filter((r) => JSON.stringify(r.messages[0]) === JSON.stringify({ role: 'user', content: [{ type: 'text', text: prompt }] }))
    expect(byPrompt('structured sibling')).toHaveLength(1)
    expect(toolNames(byPrompt('structured sibling')[0]!)).toContain(SO)
    for (const prompt of ['plain sibling', 'top-level']) {
      const requests = byPrompt(prompt)
      expect(requests).toHaveLength(1)
      expect(toolNames(requests[0]!)).toEqual(['echo'])
      expect(requests[0]!.system ?? '').not.toContain(INSTRUCTION)
    }
  })

  it('a request with no visible tools has no tools field at all (top-level agent and child)', async () => {
    const fixture = setup(transport, [textResponse('top'), textResponse('child')])
    await runTopLevel(fixture.parent)
    await spawnChild(fixture)
    expect(fixture.model.requests).toHaveLength(2)
    for (const request of fixture.model.requests) expect(Object.hasOwn(request, 'tools')).toBe(false)
  })

  it('structured_output called by an agent without a structured run is UNKNOWN_TOOL (top-level and plain child)', async () => {
    const fixture = setup(transport, [
      toolCallResponse('p1', SO, { answer: 'x' }),
      textResponse('top done'),
      toolCallResponse('c1', SO, { answer: 'y' }),
      textResponse('child done'),
    ])
    const topEvents = await runTopLevel(fixture.parent)
    expect(toolResults(topEvents)).toEqual([expect.objectContaining({ callId: 'p1', name: SO, isError: true, code: 'UNKNOWN_TOOL' })])
    const child = await spawnChild(fixture)
    expect(toolResults(child.events)).toEqual([expect.objectContaining({ callId: 'c1', name: SO, isError: true, code: 'UNKNOWN_TOOL' })])
    expect(child.result).toEqual({ output: [{ type: 'text', text: 'child done' }], usage: { inputTokens: 0, outputTokens: 7 }, totalUsage: { inputTokens: 0, outputTokens: 7 }, stopReason: 'completed' })
    expect(fixture.model.requests).toHaveLength(4)
  })

  it('invalid arguments give INVALID_ARGS and the model may retry in the same turn', async () => {
    const fixture = setup(transport, [
      toolCallResponse('s1', SO, { answer: 42 }),
      toolCallResponse('s2', SO, '{"answer": '),
      toolCallResponse('s3', SO, { answer: 'ok', unexpected: 1 }),
      toolCallResponse('s4', SO, { answer: 'forty-two' }),
      textResponse('never requested'),
    ])
    const { events, result } = await spawnChild(fixture, { outputSchema: SCHEMA })
    expect(toolResults(events).map((r) => [r.callId, r.isError, r.code])).toEqual([
      ['s1', true, 'INVALID_ARGS'],
      ['s2', true, 'INVALID_ARGS'],
      ['s3', true, 'INVALID_ARGS'],
      ['s4', false, undefined],
    ])
    expect(types(events).filter((t) => t === 'turn/start')).toHaveLength(1)
    expect(fixture.model.requests).toHaveLength(4)
    expect(result).toEqual({ output: [callBlock('s4', { answer: 'forty-two' })], structured: { answer: 'forty-two' }, usage: { inputTokens: 0, outputTokens: 21 }, totalUsage: { inputTokens: 0, outputTokens: 21 }, stopReason: 'completed' })
  })

  it('two-phase commit: a valid call that a later hook turns into an error captures nothing', async () => {
    const fixture = setup(transport, [toolCallResponse('v1', SO, { answer: 'vetoed', veto: true }), textResponse('I give up'), textResponse('never requested')])
    const { events, result } = await spawnChild(fixture, { outputSchema: SCHEMA })
    expect(toolResults(events)).toEqual([
      expect.objectContaining({ callId: 'v1', name: SO, isError: true, code: 'FAILED', content: [{ type: 'text', text: 'vetoed by the afterTool hook' }] }),
    ])
    // Nothing was captured, so the turn was not concluded: the model got another request.
    expect(fixture.model.requests).toHaveLength(2)
    expect(result).not.toHaveProperty('structured')
    expect(withoutDiagnostic(result)).toEqual({ output: [{ type: 'text', text: 'I give up' }], usage: { inputTokens: 0, outputTokens: 11 }, totalUsage: { inputTokens: 0, outputTokens: 11 }, stopReason: 'error' })
  })

  it('two-phase commit: the value captured is the call that was checked, whatever a hook later does to its arguments', async () => {
    const fixture = setup(transport, [toolCallResponse('t1', SO, { answer: 'as called', tamper: true }), textResponse('never requested')])
    const { result } = await spawnChild(fixture, { outputSchema: SCHEMA })
    expect(result).toMatchObject({ structured: { answer: 'as called', tamper: true }, stopReason: 'completed' })
    expect(fixture.model.requests).toHaveLength(1)
  })

  it('two-phase commit: a discarded stage is never promoted; a later valid call reusing its call id captures only its own value', async () => {
    const fixture = setup(transport, [
      toolCallResponse('dup', SO, { answer: 'vetoed', items: [1], veto: true }),
      toolCallResponse('dup', SO, { answer: 'good', items: [2, 3] }),
      textResponse('never requested'),
    ])
    const { events, result } = await spawnChild(fixture, { outputSchema: SCHEMA })
    expect(toolResults(events).map((r) => [r.callId, r.isError, r.code])).toEqual([
      ['dup', true, 'FAILED'],
      ['dup', false, undefined],
    ])
    expect(fixture.model.requests).toHaveLength(2)
    expect(result).toEqual({ output: [callBlock('dup', { answer: 'good', items: [2, 3] })], structured: { answer: 'good', items: [2, 3] }, usage: { inputTokens: 0, outputTokens: 19 }, totalUsage: { inputTokens: 0, outputTokens: 19 }, stopReason: 'completed' })
  })

  it('two-phase commit within one response: a vetoed call and a later valid call with the same id capture only the valid value', async () => {
    const fixture = setup(transport, [
      toolCallsResponse([
        { id: 'dup', name: SO, args: { answer: 'vetoed', veto: true } },
        { id: 'dup', name: SO, args: { answer: 'good' } },
      ]),
      textResponse('never requested'),
    ])
    const { events, result } = await spawnChild(fixture, { outputSchema: SCHEMA })
    expect(toolResults(events).map((r) => [r.callId, r.isError, r.code])).toEqual([
      ['dup', true, 'FAILED'],
      ['dup', false, undefined],
    ])
    expect(fixture.model.requests).toHaveLength(1)
    expect(result.structured).toEqual({ answer: 'good' })
    expect(result.stopReason).toBe('completed')
  })

  it('the acknowledgement value is { recorded: true }, rendered "Structured output recorded."', async () => {
    const fixture = setup(transport, [toolCallResponse('s1', SO, { answer: 'x' })])
    const { events } = await spawnChild(fixture, { outputSchema: SCHEMA })
    expect(toolResults(events)).toEqual([{ callId: 's1', name: SO, isError: false, content: [{ type: 'text', text: ACK }], value: { recorded: true } }])
  })

  it('a capture concludes the turn: no further model request is spent', async () => {
    const echo = echoTool()
    const fixture = setup(transport, [
      toolCallResponse('e1', 'echo', { text: 'look first' }),
      toolCallResponse('s1', SO, { answer: 'x' }),
      textResponse('never requested'),
    ])
    fixture.host.tools.register(echo.tool)
    const { events, result } = await spawnChild(fixture, { outputSchema: SCHEMA })
    expect(fixture.model.requests).toHaveLength(2)
    expect(fixture.model.remaining).toBe(1)
    expect(types(events).slice(-2)).toEqual(['tool/result', 'turn/end'])
    expect(turnEnds(events)).toEqual([{ kind: 'completed' }])
    expect(result.stopReason).toBe('completed')
  })

  it('terminal: later calls in the same response are denied unexecuted with the exact text, earlier calls run normally', async () => {
    const echo = echoTool()
    const fixture = setup(transport, [
      toolCallsResponse([
        { id: 'e1', name: 'echo', args: { text: 'before' } },
        { id: 's1', name: SO, args: { answer: 'final' } },
        { id: 'e2', name: 'echo', args: { text: 'after' } },
        { id: 's2', name: SO, args: { answer: 'second' } },
      ]),
      textResponse('never requested'),
    ])
    fixture.host.tools.register(echo.tool)
    const { events, result } = await spawnChild(fixture, { outputSchema: SCHEMA })
    expect(echo.calls).toEqual([{ text: 'before' }])
    expect(toolResults(events)).toEqual([
      expect.objectContaining({ callId: 'e1', name: 'echo', isError: false, content: [{ type: 'text', text: 'echo:before' }] }),
      { callId: 's1', name: SO, isError: false, content: [{ type: 'text', text: ACK }], value: { recorded: true } },
      { callId: 'e2', name: 'echo', isError: true, code: 'DENIED', content: [{ type: 'text', text: alreadyRecorded('echo') }] },
      { callId: 's2', name: SO, isError: true, code: 'DENIED', content: [{ type: 'text', text: alreadyRecorded(SO) }] },
    ])
    expect(fixture.model.requests).toHaveLength(1)
    expect(result.structured).toEqual({ answer: 'final' })
    expect(result.stopReason).toBe('completed')
  })

  it('terminal: no hook can re-allow a call denied after the capture', async () => {
    const echo = echoTool()
    const fixture = setup(
      transport,
      [
        toolCallsResponse([
          { id: 's1', name: SO, args: { answer: 'final' } },
          { id: 'e2', name: 'echo', args: { text: 'after' } },
        ]),
        textResponse('never requested'),
      ],
      { agentModule: PERMISSIVE_MODULE },
    )
    fixture.host.tools.register(echo.tool)
    const { events, result } = await spawnChild(fixture, { outputSchema: SCHEMA })
    expect(echo.calls).toEqual([])
    expect(toolResults(events)[1]).toEqual({ callId: 'e2', name: 'echo', isError: true, code: 'DENIED', content: [{ type: 'text', text: alreadyRecorded('echo') }] })
    expect(fixture.model.requests).toHaveLength(1)
    expect(result.structured).toEqual({ answer: 'final' })
  })

  it('a capture gives structured and completed', async () => {
    const fixture = setup(transport, [toolCallResponse('s1', SO, { answer: 'yes', items: [1, 2] }, 'Here it is.')])
    const { result } = await spawnChild(fixture, { outputSchema: SCHEMA })
    expect(result).toEqual({
      output: [{ type: 'text', text: 'Here it is.' }, callBlock('s1', { answer: 'yes', items: [1, 2] })],
      structured: { answer: 'yes', items: [1, 2] },
      usage: { inputTokens: 0, outputTokens: 8 }, totalUsage: { inputTokens: 0, outputTokens: 8 }, stopReason: 'completed',
    })
  })

  it('a turn that finishes cleanly without a capture is error, with no re-prompt (exactly one model request)', async () => {
    const fixture = setup(transport, [textResponse('a plain text answer'), textResponse('never requested')])
    const { events, result } = await spawnChild(fixture, { outputSchema: SCHEMA })
    expect(fixture.model.requests).toHaveLength(1)
    expect(fixture.model.remaining).toBe(1)
    expect(types(events).filter((t) => t === 'turn/start')).toHaveLength(1)
    expect(types(events).filter((t) => t === 'user/message')).toHaveLength(1)
    expect(result).not.toHaveProperty('structured')
    expect(withoutDiagnostic(result)).toEqual({ output: [{ type: 'text', text: 'a plain text answer' }], usage: { inputTokens: 0, outputTokens: 5 }, totalUsage: { inputTokens: 0, outputTokens: 5 }, stopReason: 'error' })
  })

  it('a run cancelled without a capture is aborted', async () => {
    const fixture = setup(transport, ['hang'])
    const controller = new AbortController()
    const run = await fixture.host.spawn.start({ prompt: 'wait', parent: fixture.parent, signal: controller.signal, outputSchema: SCHEMA })
    await eventOf(run, 'assistant/chunk')
    controller.abort()
    const result = await run.result
    expect(result).not.toHaveProperty('structured')
    expect(withoutDiagnostic(result)).toEqual({ output: [{ type: 'text', text: 'partial' }], stopReason: 'aborted' })
  })

  it('a run disposed while running without a capture is aborted', async () => {
    const fixture = setup(transport, ['hang'])
    const run = await fixture.host.spawn.start({ prompt: 'wait', parent: fixture.parent, signal: signal(), outputSchema: SCHEMA })
    await fixture.model.requested(1)
    await run.dispose()
    const result = await run.result
    expect(result).not.toHaveProperty('structured')
    expect(result.stopReason).toBe('aborted')
  })

  it('an errored child stays error (model failure, missing model)', async () => {
    const fixture = setup(transport, [
      () => {
        throw new Error('upstream exploded')
      },
    ])
    const failed = await spawnChild(fixture, { outputSchema: SCHEMA })
    expect(failed.result).not.toHaveProperty('structured')
    expect(withoutDiagnostic(failed.result)).toEqual({ output: [], stopReason: 'error' })
    expect(turnEnds(failed.events).map((r) => r.kind)).toEqual(['error'])

    const missing = await spawnChild(fixture, { outputSchema: SCHEMA, agentOptions: { provider: 'no-such-model' } })
    expect(missing.result).not.toHaveProperty('structured')
    expect(withoutDiagnostic(missing.result)).toEqual({ output: [], stopReason: 'error' })
  })

  const unsupported: Array<[string, () => object]> = [
    ['a $ref', () => ({ type: 'object', properties: { a: { $ref: '#/definitions/a' } }, definitions: { a: { type: 'string' } } })],
    ['a non-object root', () => ({ type: 'string' })],
    ['a root without a type', () => ({ properties: { a: { type: 'string' } } })],
    ['a function inside', () => ({ type: 'object', properties: { a: { type: 'string', default: () => 'x' } } })],
    ['a circular reference', () => {
      const node: Record<string, unknown> = { type: 'object' }
      node['properties'] = { self: node }
      return node
    }],
    ['a non-finite number', () => ({ type: 'object', properties: { a: { type: 'number', maximum: Number.POSITIVE_INFINITY } } })],
  ]

  it.each(unsupported)('an unsupported schema (%s) rejects start() before any child exists', async (_what, schema) => {
    const store = createMemoryStore()
    const fixture = setup(transport, [toolCallResponse('s1', SO, { a: 'x' })], { store })
    const started: unknown[] = []
    fixture.host.on('subagent/start', (info) => started.push(info))
    for (const provider of [fixture.host.spawn, fixture.host.fork]) {
      const error = await provider.start({ prompt: 'never', parent: fixture.parent, signal: signal(), outputSchema: schema() }).then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(error).toBeInstanceOf(Error)
      expect((error as Error).message.length).toBeGreaterThan(0)
    }
    expect(fixture.host.agents.list().map((a) => a.id)).toEqual([fixture.parent.id])
    expect(started).toEqual([])
    expect(fixture.model.requests).toHaveLength(0)
    const stored = await store.list()
    expect(stored.sessions.filter((h) => h.id !== fixture.parent.id)).toEqual([])
  })
})
