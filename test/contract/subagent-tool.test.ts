/** CONTRACT.md §6: the model-facing `subagent` tool and the job tools, on every transport. */
import { afterEach, describe, expect, it } from 'vitest'
import {
  createJobTools,
  createSubagentTool,
  maxTokensResponse,
  refusalResponse,
  textResponse,
  toolCallResponse,
  toolCallsResponse,
  ScriptedModel,
  type ScriptEntry,
  type SessionEvent,
  type SubagentProvider,
  type ToolResultData,
} from 'subagent-worker'
import { closeHosts, failingStore, setup, TRANSPORTS } from '../support/harness.js'

afterEach(closeHosts)

const results = (events: readonly SessionEvent[]) => events.filter((e) => e.type === 'tool/result').map((e) => e.data as ToolResultData)
const text = (result: ToolResultData) => result.content.map((b) => (b.type === 'text' ? b.text : '')).join('')
const call = (id: string, args: Record<string, unknown>) => toolCallResponse(id, 'subagent', { description: 'do a task', prompt: 'the task', ...args })

describe.each(TRANSPORTS)('§6 the subagent tool [%s]', (transport) => {
  function fixture(script: Parameters<typeof setup>[1], config: Partial<Parameters<typeof createSubagentTool>[1]> = {}, childScript?: ScriptEntry[], options: Parameters<typeof setup>[2] = {}) {
    const f = setup(transport, script, options)
    // A background child runs alongside its parent, so it gets a model of its own: the shared
    // script's order would otherwise depend on thread timing.
    if (childScript) {
      f.host.models.register('child', new ScriptedModel(childScript))
      config = { agentOptions: { provider: 'child' }, ...config }
    }
    f.host.tools.register(createSubagentTool(f.host, { provider: 'spawn', ...config }))
    for (const tool of createJobTools(f.host)) f.host.tools.register(tool)
    return f
  }

  it('foreground completed returns { kind: foreground, runId, output }, rendered as the final text, and disposes the child', async () => {
    const { host, parent } = fixture([call('d1', {}), textResponse('child answer'), textResponse('parent done')])
    parent.followup('go')
    await parent.whenIdle()
    const [result] = results(parent.session.events)
    expect(result).toMatchObject({ callId: 'd1', name: 'subagent', isError: false, content: [{ type: 'text', text: 'child answer' }] })
    expect(result!.value).toEqual({ kind: 'foreground', runId: expect.any(String), output: [{ type: 'text', text: 'child answer' }] })
    expect(host.agents.list().map((a) => a.id)).toEqual([parent.id])
  })

  it.each([
    ['max-tokens', [maxTokensResponse('half an ans')], 'subagent run hit its token limit before finishing\nDiagnostic: the child hit its output token limit\nPartial output before the run ended:\nhalf an ans'],
    ['refusal', [refusalResponse()], 'subagent declined the task\nDiagnostic: the model refused the request'],
  ])('foreground %s becomes an error result: headline, diagnostic, partial output', async (_, child, expected) => {
    const { parent } = fixture([call('d1', {}), ...child, textResponse('parent done')])
    parent.followup('go')
    await parent.whenIdle()
    const [result] = results(parent.session.events)
    expect(result).toMatchObject({ isError: true, code: 'FAILED' })
    expect(text(result!)).toBe(expected)
  })

  it('a failed child is reported as "subagent run failed" with its diagnostic', async () => {
    const { parent } = fixture([call('d1', {}), textResponse('parent done')], { agentOptions: { provider: 'nowhere' } })
    parent.followup('go')
    await parent.whenIdle()
    expect(text(results(parent.session.events)[0]!)).toBe('subagent run failed\nDiagnostic: no model registered under provider "nowhere"')
  })

  it('a child that completed but whose release failed: its answer and the dispose failure, both reported', async () => {
    const { parent } = fixture([call('d1', {}), textResponse('child answer'), textResponse('parent done')], {}, undefined, { store: failingStore() })
    parent.followup('go')
    await parent.whenIdle()
    const [result] = results(parent.session.events)
    expect(result).toMatchObject({ isError: true, code: 'FAILED' })
    expect(text(result!)).toMatch(/^subagent run completed:\nchild answer\ndispose failed: session store failed for "\S+": disk full$/)
  })

  it('both the result and the disposal failed: both failures are reported, in that order', async () => {
    const { parent } = fixture([call('d1', {}), textResponse('parent done')], { agentOptions: { provider: 'nowhere' } }, undefined, { store: failingStore() })
    parent.followup('go')
    await parent.whenIdle()
    expect(text(results(parent.session.events)[0]!)).toMatch(/^subagent run failed\nDiagnostic: no model registered under provider "nowhere"\ndispose failed: session store failed for "\S+": disk full$/)
  })

  it('maxDepth 0 forbids delegation: the tool stays visible and each call fails with the depth error', async () => {
    const { parent, model } = fixture([call('d1', {}), textResponse('parent done')], { maxDepth: 0 })
    parent.followup('go')
    await parent.whenIdle()
    expect(model.requests[0]!.tools!.map((t) => t.name)).toContain('subagent')
    expect(text(results(parent.session.events)[0]!)).toBe('subagent depth 1 exceeds maxDepth 0')
  })

  it('a child calling the tool delegates again, its depth counted from its own header', async () => {
    const { host, parent } = fixture([call('d1', {}), call('d2', {}), textResponse('could not go deeper'), textResponse('parent done')], { maxDepth: 1 })
    const started: string[] = []
    host.on('subagent/start', ({ id }) => started.push(id))
    parent.followup('go')
    await parent.whenIdle()
    expect(started).toHaveLength(1)
    expect(text(results(parent.session.events)[0]!)).toBe('could not go deeper')
  })

  it('nested delegation within maxDepth reaches a grandchild', async () => {
    const { host, parent } = fixture([call('d1', {}), call('d2', {}), textResponse('grandchild answer'), textResponse('child relays'), textResponse('parent done')], { maxDepth: 2 })
    const depths: number[] = []
    host.on('subagent/start', ({ id }) => depths.push(host.agents.get(id)!.session.header.delegationDepth!))
    parent.followup('go')
    await parent.whenIdle()
    expect(depths).toEqual([1, 2])
    expect(text(results(parent.session.events)[0]!)).toBe('child relays')
  })

  it('sibling delegations in one response run concurrently and commit in the model order', async () => {
    let arrived = 0
    let release!: () => void
    const bothIn = new Promise<void>((resolve) => (release = resolve))
    const rendezvous = (answer: string) => async () => {
      if (++arrived === 2) release()
      await bothIn // only resolves if both children are in flight at once
      return textResponse(answer)
    }
    const { parent } = fixture([
      toolCallsResponse([
        { id: 'a', name: 'subagent', args: { description: 'first', prompt: 'one' } },
        { id: 'b', name: 'subagent', args: { description: 'second', prompt: 'two' } },
      ]),
      rendezvous('answer A'),
      rendezvous('answer B'),
      textResponse('parent done'),
    ])
    parent.followup('go')
    await parent.whenIdle()
    expect(results(parent.session.events).map((r) => r.callId)).toEqual(['a', 'b'])
    expect(results(parent.session.events).every((r) => !r.isError)).toBe(true)
  })

  it('background: returns a job id at once; job_output collects the final text', async () => {
    const { host, parent } = fixture(
      [call('d1', { run_in_background: true }), toolCallResponse('o1', 'job_output', { job_id: 'job-1', wait: true }), textResponse('parent done')],
      {},
      [{ delayMs: 50, chunks: textResponse('background answer') }],
    )
    parent.followup('go')
    await parent.whenIdle()
    const [started, output] = results(parent.session.events)
    expect(text(started!)).toBe('started background subagent job job-1')
    expect(started!.value).toEqual({ kind: 'background', jobId: 'job-1' })
    expect(text(output!)).toBe('job job-1 completed:\nbackground answer')
    expect(host.jobs.get('job-1')).toMatchObject({ owner: parent.id, status: 'completed', output: 'background answer' })
  })

  it('background: job_kill stops a running job, which reads as killed', async () => {
    const { host, parent } = fixture(
      [call('d1', { run_in_background: true }), toolCallResponse('k1', 'job_kill', { job_id: 'job-1' }), textResponse('parent done')],
      {},
      ['hang'],
    )
    parent.followup('go')
    await parent.whenIdle()
    expect(text(results(parent.session.events)[1]!)).toBe('job job-1 was killed')
    expect(host.jobs.get('job-1')!.status).toBe('killed')
    expect(host.agents.list().map((a) => a.id)).toEqual([parent.id])
  })

  it('background jobs a child started are stopped when that child is disposed: nothing outlives it', async () => {
    const { host, parent } = fixture([call('d1', {}), textResponse('parent done')], { maxDepth: 2 }, [
      toolCallResponse('g1', 'bg_subagent', { description: 'side task', prompt: 'run long', run_in_background: true }),
      textResponse('child done'),
    ])
    // The grandchild runs on a model of its own (it hangs) through a second tool instance.
    host.models.register('grandchild', new ScriptedModel(['hang']))
    host.tools.register(createSubagentTool(host, { provider: 'spawn', toolName: 'bg_subagent', agentOptions: { provider: 'grandchild' } }))
    parent.followup('go')
    await parent.whenIdle()
    expect(text(results(parent.session.events)[0]!)).toBe('child done')
    expect(host.agents.list().map((a) => a.id)).toEqual([parent.id])
    expect(host.jobs.list()).toEqual([])
  })

  it('background: a failed job keeps its stop reason and diagnostic', async () => {
    const { host, parent } = fixture([call('d1', { run_in_background: true }), textResponse('parent done')], { agentOptions: { provider: 'nowhere' } })
    parent.followup('go')
    await parent.whenIdle()
    const job = await host.jobs.wait('job-1')
    expect(job).toMatchObject({ status: 'failed', detail: 'error; diagnostic: no model registered under provider "nowhere"' })
  })

  it('background: a job whose release failed keeps its outcome, with dispose failed appended, and job_output says both', async () => {
    const { host, parent } = fixture(
      [call('d1', { run_in_background: true }), toolCallResponse('o1', 'job_output', { job_id: 'job-1', wait: true }), textResponse('parent done')],
      {},
      [textResponse('background answer')],
      { store: failingStore() },
    )
    parent.followup('go')
    await parent.whenIdle()
    const job = await host.jobs.wait('job-1')
    expect(job).toMatchObject({ status: 'completed', output: 'background answer' })
    expect(job.detail).toMatch(/^dispose failed: session store failed for "\S+": disk full$/)
    expect(text(results(parent.session.events)[1]!)).toBe(`job job-1 completed (${job.detail}):\nbackground answer`)
  })

  it('background: a killed job whose release failed says so in job_output', async () => {
    const { host, parent } = fixture(
      [call('d1', { run_in_background: true }), toolCallResponse('k1', 'job_kill', { job_id: 'job-1' }), textResponse('parent done')],
      {},
      ['hang'],
      { store: failingStore() },
    )
    parent.followup('go')
    await parent.whenIdle()
    const job = host.jobs.get('job-1')!
    expect(job).toMatchObject({ status: 'killed', detail: expect.stringMatching(/^dispose failed: session store failed for "\S+": disk full$/) })
    expect(text(results(parent.session.events)[1]!)).toBe(`job job-1 was killed: ${job.detail}`)
  })

  it('with background disabled, run_in_background: true is an error', async () => {
    const { parent, model } = fixture([call('d1', { run_in_background: true }), textResponse('parent done')], { enableRunInBackground: false })
    parent.followup('go')
    await parent.whenIdle()
    const schema = model.requests[0]!.tools!.find((t) => t.name === 'subagent')!.parameters as { properties: object }
    expect(Object.keys(schema.properties)).toEqual(['description', 'prompt'])
    // The error names the field and the rule, for the model to fix its call.
    expect(results(parent.session.events)[0]).toMatchObject({
      isError: true,
      code: 'INVALID_ARGS',
      content: [{ type: 'text', text: 'invalid arguments for "subagent": unknown property "run_in_background"' }],
    })
  })

  it('a missing or mistyped argument is named in the error the model reads', async () => {
    const { parent } = fixture([
      toolCallResponse('a', 'subagent', { description: 'no prompt' }),
      toolCallResponse('b', 'subagent', { description: 'typed wrong', prompt: 7 }),
      textResponse('parent done'),
    ])
    parent.followup('go')
    await parent.whenIdle()
    expect(results(parent.session.events).map((r) => (r as { content: Array<{ text: string }> }).content[0]!.text)).toEqual([
      'invalid arguments for "subagent": missing property "prompt"',
      'invalid arguments for "subagent": arguments.prompt must be string',
    ])
  })
})

describe('§6 the subagent tool: configuration', () => {
  it('spawn and fork tools describe themselves differently', async () => {
    const { host } = setup('inline')
    const spawn = createSubagentTool(host, { provider: 'spawn' })
    const fork = createSubagentTool(host, { provider: 'fork', toolName: 'fork_subagent' })
    expect(spawn.name).toBe('subagent')
    expect(fork.name).toBe('fork_subagent')
    expect(spawn.description).not.toBe(fork.description)
    const prompt = (tool: typeof spawn) => (tool.parameters as { properties: { prompt: { description: string } } }).properties.prompt.description
    expect(prompt(spawn)).not.toBe(prompt(fork))
  })

  it.each([
    ['a numeric maxDepth (the default, 3)', {}, 3],
    ["'provider-managed'", { maxDepth: 'provider-managed' as const }, undefined],
  ])('%s: the start request the provider gets carries that cap', async (_, config, cap) => {
    const { host, parent } = setup('inline', [call('d1', {}), textResponse('child answer'), textResponse('parent done')])
    const requests: Array<Parameters<SubagentProvider['start']>[0]> = []
    const recording: SubagentProvider = {
      ...host.spawn,
      name: 'recording',
      start: (request) => {
        requests.push(request)
        return host.spawn.start(request)
      },
    }
    host.tools.register(createSubagentTool(host, { provider: recording, ...config }))
    parent.followup('go')
    await parent.whenIdle()
    expect(requests).toHaveLength(1)
    expect('maxDepth' in requests[0]!).toBe(cap !== undefined)
    expect(requests[0]!.maxDepth).toBe(cap)
    expect(text(results(parent.session.events)[0]!)).toBe('child answer')
  })

  it('misconfiguration fails when the tool is mounted', () => {
    const { host } = setup('inline')
    const limited: SubagentProvider = { ...host.spawn, name: 'acp', capabilities: { outputSchema: false, depthLimit: false, toolFilter: false, persona: false } }
    expect(() => createSubagentTool(host, { provider: limited })).toThrow(/no depthLimit capability/)
    expect(() => createSubagentTool(host, { provider: limited, maxDepth: 'provider-managed' })).not.toThrow()
    expect(() => createSubagentTool(host, { provider: limited, maxDepth: 'provider-managed', persona: 'x' })).toThrow(/no persona capability/)
    expect(() => createSubagentTool(host, { provider: 'spawn', toolFilter: {} })).toThrow('subagent tool toolFilter must name allow or deny')
    expect(() => createSubagentTool(host, { provider: 'spawn', maxDepth: -1 })).toThrow(/non-negative safe integer/)
  })
})
