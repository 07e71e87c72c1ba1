/**
 * Transport parity (CONTRACT.md §8: "The contract above holds unchanged across the thread
 * boundary"): what a child sees and records is the same whether it runs inline or in a worker.
 */
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { defineTool, STRUCTURED_OUTPUT_TOOL, textResponse, toolCallResponse, toolCallsResponse, ToolError, type ToolResultData } from 'subagent-worker'
import { closeHosts, setup, signal, TRANSPORTS } from '../support/harness.js'
import { eventOf } from '../support/driver-helpers.js'

const PARITY_MODULE = fileURLToPath(new URL('../fixtures/parity-module.mjs', import.meta.url))
afterEach(closeHosts)

const toolResults = (events: readonly { type: string; data: unknown }[]) => events.filter((e) => e.type === 'tool/result').map((e) => e.data as ToolResultData)

describe.each(TRANSPORTS)('transport parity [%s]', (transport) => {
  it('a tool value that cannot cross a thread is dropped from the record on every transport; its text stays', async () => {
    const { host, parent } = setup(transport, [toolCallResponse('c', 'odd_value', {}), textResponse('done')], { agentModule: PARITY_MODULE })
    const run = await host.spawn.start({ prompt: 'x', parent, signal: signal() })
    expect((await run.result).stopReason).toBe('completed')
    const [result] = toolResults(host.agents.get(run.id)!.session.events)
    expect(result).toEqual({ callId: 'c', name: 'odd_value', isError: false, content: [{ type: 'text', text: '{"kept":1}' }] })
    await run.dispose()
  })

  it("a host model is told the guidance of every tool the child sees, the module's and the host's, on every transport (CONTRACT.md §2a)", async () => {
    const fx = setup(transport, [textResponse('done')], { agentModule: PARITY_MODULE })
    fx.host.tools.register(defineTool({ name: 'hosted', description: 'A host tool.', guidance: 'HOST GUIDANCE: hosted is on the host.', parameters: { type: 'object' }, execute: () => 'ok' }))
    const filtered = setup(transport, [textResponse('done')], { agentModule: PARITY_MODULE })
    expect((await fx.host.spawn.run({ prompt: 'x', parent: fx.parent, signal: signal() })).stopReason).toBe('completed')
    expect((await filtered.host.spawn.run({ prompt: 'x', parent: filtered.parent, signal: signal(), toolFilter: { deny: ['guided'] } })).stopReason).toBe('completed')
    const system = fx.model.requests[0]!.system!
    expect(system).toContain('MODULE GUIDANCE: call guided before answering.')
    expect(system.indexOf('HOST GUIDANCE: hosted is on the host.')).toBeLessThan(system.indexOf('MODULE GUIDANCE'))
    // A tool the child does not see tells it nothing.
    expect(filtered.model.requests[0]!.system!).not.toContain('MODULE GUIDANCE')
  })

  it('a tool value its render cannot write is a FAILED result and the turn goes on, a host tool\'s and a module tool\'s alike (CONTRACT.md §2a)', async () => {
    const fx = setup(transport, [toolCallsResponse([{ id: 'h', name: 'big_host', args: {} }, { id: 'm', name: 'big_value', args: {} }, { id: 'r', name: 'bad_render', args: {} }]), textResponse('done')], { agentModule: PARITY_MODULE })
    fx.host.tools.register(defineTool({ name: 'big_host', description: 'BigInt', parameters: { type: 'object' }, execute: () => 2n }))
    fx.host.tools.register(defineTool({ name: 'bad_render', description: 'render throws', parameters: { type: 'object' }, execute: () => 'v', render: () => { throw new Error('render boom') } }))
    const run = await fx.host.spawn.start({ prompt: 'x', parent: fx.parent, signal: signal() })
    expect(await run.result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'done' }] })
    expect(toolResults(fx.host.agents.get(run.id)!.session.events)).toEqual([
      { callId: 'h', name: 'big_host', isError: true, code: 'FAILED', content: [{ type: 'text', text: 'tool "big_host" failed: Do not know how to serialize a BigInt' }] },
      { callId: 'm', name: 'big_value', isError: true, code: 'FAILED', content: [{ type: 'text', text: 'tool "big_value" failed: Do not know how to serialize a BigInt' }] },
      { callId: 'r', name: 'bad_render', isError: true, code: 'FAILED', content: [{ type: 'text', text: 'tool "bad_render" failed: render boom' }] },
    ])
    await run.dispose()
  })

  it('two calls of one step with the same id are two runs, each with its own result, on every transport (CONTRACT.md §2a)', async () => {
    const fx = setup(transport, [toolCallsResponse([{ id: 'd', name: 'count', args: { n: 1 } }, { id: 'd', name: 'count', args: { n: 2 } }]), textResponse('done')])
    const runs: number[] = []
    fx.host.tools.register(defineTool({ name: 'count', description: 'count', parameters: { type: 'object', properties: { n: { type: 'number' } } }, execute: ({ n }: { n: number }) => (runs.push(n), `run ${n}`) }))
    const run = await fx.host.spawn.start({ prompt: 'x', parent: fx.parent, signal: signal() })
    expect((await run.result).stopReason).toBe('completed')
    expect(runs.sort()).toEqual([1, 2])
    expect(toolResults(fx.host.agents.get(run.id)!.session.events).map((r) => r.content)).toEqual([[{ type: 'text', text: 'run 1' }], [{ type: 'text', text: 'run 2' }]])
    await run.dispose()
  })

  it('a ToolError of a code no tool result has reads as a plain failure with its own text, on every transport', async () => {
    const fx = setup(transport, [toolCallResponse('c', 'odd_code', {}), textResponse('done')])
    fx.host.tools.register(defineTool({ name: 'odd_code', description: 'odd code', parameters: { type: 'object' }, execute: () => { throw new ToolError('no such thing', 'BOGUS' as never) } }))
    const run = await fx.host.spawn.start({ prompt: 'x', parent: fx.parent, signal: signal() })
    expect((await run.result).stopReason).toBe('completed')
    expect(toolResults(fx.host.agents.get(run.id)!.session.events)).toEqual([{ callId: 'c', name: 'odd_code', isError: true, code: 'FAILED', content: [{ type: 'text', text: 'no such thing' }] }])
    await run.dispose()
  })

  it('an afterTool result that is not plain, known data becomes a FAILED result on every transport', async () => {
    const { host, parent } = setup(transport, [toolCallResponse('c', 'echo', { badHook: true }), textResponse('done')])
    host.tools.register(defineTool({ name: 'echo', description: 'echo', parameters: { type: 'object' }, execute: () => 'ok' }))
    const run = await host.spawn.start({ prompt: 'x', parent, signal: signal() })
    expect((await run.result).stopReason).toBe('completed')
    const [result] = toolResults(host.agents.get(run.id)!.session.events)
    expect(result).toMatchObject({ isError: true, code: 'FAILED' })
    expect(result!.content[0]).toMatchObject({ text: expect.stringMatching(/^afterTool hook failed: /) })
    await run.dispose()
  })

  it('a malformed chunk from a host model ends the turn error, naming it, on every transport', async () => {
    const { host, parent } = setup(transport, [() => [{ type: 'text-delta', text: 'fine' }, { type: 'bogus' } as never]])
    const run = await host.spawn.start({ prompt: 'x', parent, signal: signal() })
    const { stopReason, diagnostic } = await run.result
    expect(stopReason).toBe('error')
    expect(diagnostic).toMatch(/^model stream failed: the model emitted a malformed stream chunk/)
    await run.dispose()
  })

  it('a child sees the host tools registered at its creation: later registrations are for later children', async () => {
    const { host, parent, model } = setup(transport, [{ delayMs: 100, chunks: toolCallResponse('c', 'late', {}) }, textResponse('done'), textResponse('second')])
    const run = await host.spawn.start({ prompt: 'x', parent, signal: signal() })
    host.tools.register(defineTool({ name: 'late', description: 'late', parameters: { type: 'object' }, execute: () => 'ran' }))
    await run.result
    expect(toolResults(host.agents.get(run.id)!.session.events)[0]).toMatchObject({ isError: true, code: 'UNKNOWN_TOOL' })
    expect(model.requests[0]!.tools).toBeUndefined()
    const next = await host.spawn.start({ prompt: 'y', parent, signal: signal() })
    await next.result
    expect(model.requests[2]!.tools!.map((t) => t.name)).toEqual(['late'])
    await Promise.all([run.dispose(), next.dispose()])
  })

  it("a host tool's exec.agent is the host's view of the child, not a handle on its runtime", async () => {
    const { host, parent } = setup(transport, [toolCallResponse('c', 'inspect', {}), textResponse('done')])
    let same = false
    let powers: string[] = []
    host.tools.register(
      defineTool({
        name: 'inspect',
        description: 'inspect',
        parameters: { type: 'object' },
        execute: (_args, exec) => {
          same = exec.agent === host.agents.get(exec.agent.id)
          powers = ['followup', 'cancel', 'tools', 'prompt'].filter((key) => key in exec.agent)
          return 'ok'
        },
      }),
    )
    const run = await host.spawn.start({ prompt: 'x', parent, signal: signal() })
    await run.result
    expect(same).toBe(true)
    expect(powers).toEqual([])
    await run.dispose()
  })

  it('a module tool sees a plain view of its child, with the child header', async () => {
    const { host, parent } = setup(transport, [toolCallResponse('c', 'agent_view', {}), textResponse('done')], { agentModule: PARITY_MODULE })
    const run = await host.spawn.start({ prompt: 'x', parent, signal: signal() })
    await run.result
    const [result] = toolResults(host.agents.get(run.id)!.session.events)
    expect(result!.value).toEqual({ id: run.id, header: host.agents.get(run.id)!.session.header, canFollowup: false, canRegisterTools: false })
    await run.dispose()
  })

  it('a pending beforeStep hook does not hold up dispose: the run settles aborted', async () => {
    const { host, parent } = setup(transport, [], { abortGraceMs: 5_000 })
    const run = await host.spawn.start({ prompt: 'x', parent, signal: signal(), agentOptions: { model: 'hang-step' } })
    // The descriptor is recorded right before beforeStep is called, and module code runs only once
    // what was recorded before it is sent: once the host has it, the hook is pending.
    await eventOf(run, 'subagent/descriptor')
    await run.dispose()
    expect((await run.result).stopReason).toBe('aborted')
  })

  it('inherited options are checked as the child’s own: a foreign parent with a bad maxTokens is refused on every transport', async () => {
    const { host } = setup(transport, [])
    const foreign = { id: 'foreign', options: { provider: 'scripted', maxTokens: 1.5 }, session: { header: { id: 'foreign', createdAt: 'x' }, events: [] } }
    await expect(host.spawn.start({ prompt: 'x', parent: foreign, signal: signal() })).rejects.toThrow(/maxTokens must be a positive safe integer/)
    const badCwd = { ...foreign, options: {}, session: { header: { id: 'foreign', createdAt: 'x', cwd: 42 as never }, events: [] } }
    await expect(host.spawn.start({ prompt: 'x', parent: badCwd, signal: signal() })).rejects.toThrow('subagent parent session.header.cwd must be a string')
  })

  it('a cancelled structured run that ends without a capture is aborted, not error', async () => {
    const { host, parent, model } = setup(transport, [{ hangAfter: [{ type: 'text-delta', text: 'thinking' }] }])
    const controller = new AbortController()
    const run = await host.spawn.start({ prompt: 'x', parent, signal: controller.signal, outputSchema: { type: 'object', properties: { a: { type: 'string' } } } })
    // The streamed 'thinking' is recorded once the model was asked.
    await eventOf(run, 'assistant/chunk')
    expect(model.requests[0]!.tools!.map((t) => t.name)).toEqual([STRUCTURED_OUTPUT_TOOL])
    controller.abort()
    expect((await run.result).stopReason).toBe('aborted')
    await run.dispose()
  })

  it('close() with a start in flight rejects that start and leaves nothing live', async () => {
    const { host, parent } = setup(transport, ['hang'])
    const starting = host.spawn.start({ prompt: 'x', parent, signal: signal() })
    const closing = host.close()
    await expect(starting).rejects.toThrow(/the host is closed/)
    await closing
    expect(host.agents.list().map((a) => a.id)).toEqual([parent.id])
  })
})
