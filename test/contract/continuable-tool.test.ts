/**
 * CONTRACT.md §13, the model-facing half: the subagent tool's continuable mode, send_message, and
 * settlement notices in the parent's session (a running parent at its next step, an idle one at
 * its next turn), for a top-level parent and for a parent that is itself a child on a runner.
 * Every transport. Children wait on gates the test opens, never on time.
 */
import { afterEach, describe, expect, it } from 'vitest'
import {
  createSendMessageTool,
  createSubagentTool,
  defineTool,
  InvalidOptionError,
  ScriptedModel,
  textResponse,
  toolCallResponse,
  toolCallsResponse,
  type Host,
  type ModelRequest,
  type ScriptEntry,
  type SessionEvent,
  type Settlement,
  type SubagentProvider,
  type SubagentToolConfig,
  type ToolResultData,
} from 'subagent-worker'
import { closeHosts, setup, shape, TRANSPORTS } from '../support/harness.js'

afterEach(closeHosts)

const results = (events: readonly SessionEvent[]) => events.filter((e) => e.type === 'tool/result').map((e) => e.data as ToolResultData)
const text = (result: ToolResultData) => result.content.map((b) => (b.type === 'text' ? b.text : '')).join('')
const start = (id: string, prompt = 'the task', extra: Record<string, unknown> = {}) => toolCallResponse(id, 'subagent', { description: 'do a task', prompt, ...extra })
const notice = (id: string, answer: string, activation = 1) => ({
  type: 'user/message',
  data: { content: [{ type: 'text', text: `subagent ${id} finished (completed)\n${answer}` }], source: { kind: 'subagent-settlement', subagentId: id, activation } },
})
const lastMessage = (request: ModelRequest) => request.messages.at(-1)
const GUIDANCE_HEAD = 'Delegating with subagent: subagents run in the background by default.'

function gate(): { open(): void; opened: Promise<void> } {
  let open!: () => void
  const opened = new Promise<void>((resolve) => (open = resolve))
  return { open, opened }
}

/** A scripted answer given only once `g` is open. */
const gated = (g: { opened: Promise<void> }, answer: string): ScriptEntry => async () => (await g.opened, textResponse(answer))

/** The next settlement that matches, from now on. */
function settled(host: Host, match: (s: Settlement) => boolean = () => true): Promise<Settlement> {
  return new Promise((resolve) => {
    const off = host.on('subagent/settled', (s) => {
      if (!match(s)) return
      off()
      resolve(s)
    })
  })
}

describe.each(TRANSPORTS)('§13 the continuable subagent tool and settlement notices [%s]', (transport) => {
  function fixture(script: ScriptEntry[], childScript: ScriptEntry[], config: Partial<SubagentToolConfig> = {}) {
    const f = setup(transport, script)
    // The child has a model of its own: it runs alongside its parent.
    const child = new ScriptedModel(childScript)
    f.host.models.register('child', child)
    f.host.tools.register(createSubagentTool(f.host, { provider: 'spawn', backgroundMode: 'continuable', agentOptions: { provider: 'child' }, ...config }))
    f.host.tools.register(createSendMessageTool(f.host))
    return { ...f, child }
  }

  /** A host tool that opens `g` and returns once the next settlement came: the parent is running all along. */
  function waitTool(host: Host, g?: { open(): void }, name = 'wait_settled') {
    host.tools.register(
      defineTool({
        name,
        description: 'Waits until a subagent settles.',
        parameters: { type: 'object', properties: {}, additionalProperties: false },
        async execute() {
          const next = settled(host)
          g?.open()
          const s = await next
          return `settled ${s.id}`
        },
      }),
    )
  }

  it('a start returns { kind: continuable, subagentId } rendered "started subagent <id>" before the work is done; the running parent takes the notice at its next step', async () => {
    const g = gate()
    const { host, parent, model } = fixture([start('c1'), toolCallResponse('w1', 'wait_settled', {}), textResponse('parent done')], [gated(g, 'child answer')])
    waitTool(host, g)
    const first = settled(host)
    parent.followup('go')
    await parent.whenIdle()
    const { id } = await first
    const [started, waited] = results(parent.session.events)
    expect(started).toEqual({ callId: 'c1', name: 'subagent', isError: false, content: [{ type: 'text', text: `started subagent ${id}` }], value: { kind: 'continuable', subagentId: id } })
    expect(text(waited!)).toBe(`settled ${id}`)
    const events = parent.session.events
    expect(shape(events)).toEqual(['turn/start', 'user/message', 'assistant/message', 'tool/result', 'assistant/message', 'tool/result', 'user/message', 'assistant/chunk', 'assistant/message', 'turn/end'])
    expect(events[6]).toMatchObject(notice(id, 'child answer'))
    // Taken before the step's model request: the model sees it last.
    expect(lastMessage(model.requests[2]!)).toEqual({ role: 'user', content: [{ type: 'text', text: `subagent ${id} finished (completed)\nchild answer` }] })
    expect(host.agents.get(id)).toBeDefined() // a continuable child outlives the call
  })

  // §11: limits given through the tool's config and as the host's default reach every child the tool starts, continuable ones too.
  it("a continuable child takes the tool config's limits and the host's default: its header holds both, and its step limit settles it aborted", async () => {
    const f = setup(transport, [start('c1'), textResponse('started it')], { limits: { timeoutMs: 600_000 } })
    const child = new ScriptedModel([toolCallResponse('n1', 'noop', {}), textResponse('never asked')])
    f.host.models.register('child', child)
    f.host.tools.register(defineTool({ name: 'noop', description: 'does nothing', parameters: { type: 'object' }, execute: () => 'ok' }))
    f.host.tools.register(createSubagentTool(f.host, { provider: 'spawn', backgroundMode: 'continuable', agentOptions: { provider: 'child' }, limits: { maxSteps: 1 } }))
    const done = settled(f.host)
    await f.parent.run('go')
    const settlement = await done
    expect(settlement).toMatchObject({ activation: 1, stopReason: 'aborted', diagnostic: 'the child exceeded limits.maxSteps (1 steps)' })
    expect(child.requests).toHaveLength(1)
    expect(f.host.agents.get(settlement.id)!.session.header.limits).toEqual({ maxSteps: 1, timeoutMs: 600_000 })
  })

  it('an idle parent finds the notice at its next turn; the notice alone starts no turn', async () => {
    const g = gate()
    const { host, parent, model } = fixture([start('c1'), textResponse('started it'), textResponse('noted')], [gated(g, 'late answer')])
    await parent.run('go')
    const before = parent.session.events.length
    const done = settled(host)
    g.open()
    const { id } = await done
    expect(parent.session.events.length).toBe(before)
    await parent.whenIdle()
    expect(parent.session.events.length).toBe(before)
    const outcome = await parent.run('anything new?')
    expect(outcome.output).toEqual([{ type: 'text', text: 'noted' }])
    const turn = parent.session.events.slice(before)
    expect(shape(turn)).toEqual(['turn/start', 'user/message', 'user/message', 'assistant/chunk', 'assistant/message', 'turn/end'])
    expect(turn[1]).toMatchObject({ data: { content: [{ type: 'text', text: 'anything new?' }], source: { kind: 'user' } } })
    expect(turn[2]).toMatchObject(notice(id, 'late answer'))
    expect(model.requests[2]!.messages.slice(-2)).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'anything new?' }] },
      { role: 'user', content: [{ type: 'text', text: `subagent ${id} finished (completed)\nlate answer` }] },
    ])
  })

  it('a notice names its settlement\'s stop reason, and has no second line when the activation left no assistant message', async () => {
    const g = gate()
    const failing: ScriptEntry = async () => {
      await g.opened
      throw new Error('the model is down')
    }
    const { host, parent, model } = fixture([start('c1'), textResponse('started it'), textResponse('noted')], [failing])
    await parent.run('go')
    const done = settled(host)
    g.open()
    const settlement = await done
    expect(settlement).toMatchObject({ stopReason: 'error', activation: 1 })
    expect(settlement.lastAssistantMessage).toBeUndefined()
    const before = parent.session.events.length
    await parent.run('anything new?')
    const text = `subagent ${settlement.id} finished (error)`
    expect(parent.session.events[before + 2]).toMatchObject({ type: 'user/message', data: { content: [{ type: 'text', text }], source: { kind: 'subagent-settlement', subagentId: settlement.id, activation: 1 } } })
    expect(model.requests[2]!.messages.at(-1)).toEqual({ role: 'user', content: [{ type: 'text', text }] })
  })

  it('run_in_background: false runs a one-shot in the foreground: the final text, and the child is disposed', async () => {
    const { host, parent } = fixture([start('c1', 'the task', { run_in_background: false }), textResponse('parent done')], [textResponse('child answer')])
    await parent.run('go')
    const [result] = results(parent.session.events)
    expect(result).toEqual({ callId: 'c1', name: 'subagent', isError: false, content: [{ type: 'text', text: 'child answer' }], value: { kind: 'foreground', runId: expect.any(String), output: [{ type: 'text', text: 'child answer' }] } })
    expect(host.agents.list().map((a) => a.id)).toEqual([parent.id])
  })

  it('the schema says run_in_background defaults to true, and the system prompt carries the tool:subagent guidance', async () => {
    const { parent, model } = fixture([textResponse('nothing to do')], [])
    await parent.run('go')
    const [request] = model.requests
    const tool = request!.tools!.find((t) => t.name === 'subagent')!
    const properties = (tool.parameters as { properties: Record<string, { description: string }> }).properties
    expect(properties.run_in_background!.description).toMatch(/^Run in the background \(default true\)/)
    expect(tool.description).toContain('send_message gives it more work')
    expect(request!.system).toContain(GUIDANCE_HEAD)
    expect(request!.system).toContain('Use run_in_background: false only when your very next action depends on the result.')
  })

  it('with background disabled there is no run_in_background, no guidance, and a forced background call is refused', async () => {
    const { parent, model } = fixture([start('c1', 'the task', { run_in_background: true }), textResponse('parent done')], [], { enableRunInBackground: false })
    await parent.run('go')
    const [request] = model.requests
    const tool = request!.tools!.find((t) => t.name === 'subagent')!
    expect(Object.keys((tool.parameters as { properties: object }).properties)).toEqual(['description', 'prompt'])
    expect(request!.system ?? '').not.toContain(GUIDANCE_HEAD)
    const [result] = results(parent.session.events)
    expect(result).toMatchObject({ isError: true, code: 'INVALID_ARGS' })
  })

  it('send_message: "message sent to subagent <id>" and one more activation; unknown, foreign and disposed ids are refused saying which', async () => {
    const ids = { own: '', foreign: '', disposed: '' }
    const sends = () =>
      toolCallsResponse([
        { id: 's1', name: 'send_message', args: { subagent_id: 'nope', message: 'x' } },
        { id: 's2', name: 'send_message', args: { subagent_id: ids.foreign, message: 'x' } },
        { id: 's3', name: 'send_message', args: { subagent_id: ids.disposed, message: 'x' } },
        { id: 's4', name: 'send_message', args: { subagent_id: ids.own, message: 'more' } },
      ])
    const { host, parent } = fixture([sends, textResponse('parent done')], [textResponse('first'), textResponse('other'), textResponse('gone'), textResponse('second')])
    const other = host.createAgent({ options: { provider: 'scripted' } })
    const ownFirst = settled(host)
    const own = await host.spawn.startContinuable({ prompt: 'task', parent, agentOptions: { provider: 'child' } })
    ids.own = own.id
    await ownFirst
    const foreign = await host.spawn.startContinuable({ prompt: 'task', parent: other, agentOptions: { provider: 'child' } })
    ids.foreign = foreign.id
    await settled(host, (s) => s.id === foreign.id)
    const disposed = await host.spawn.startContinuable({ prompt: 'task', parent, agentOptions: { provider: 'child' } })
    ids.disposed = disposed.id
    await settled(host, (s) => s.id === disposed.id)
    await disposed.dispose()
    const second = settled(host, (s) => s.id === own.id && s.activation === 2)
    await parent.run('go')
    const texts = results(parent.session.events).map((r) => [r.isError, text(r)])
    expect(texts).toEqual([
      [true, 'unknown subagent "nope": send_message takes the id the subagent tool returned when it started a subagent in the background'],
      [true, `subagent ${foreign.id} was not started by you: you may send messages only to subagents you started`],
      [true, `subagent ${disposed.id} was disposed: it takes no more work; start a new subagent instead`],
      [false, `message sent to subagent ${own.id}`],
    ])
    expect(results(parent.session.events)[3]!.value).toEqual({ kind: 'message-sent', subagentId: own.id })
    expect(await second).toMatchObject({ id: own.id, parentId: parent.id, activation: 2, stopReason: 'completed', output: [{ type: 'text', text: 'second' }] })
  })

  it('a parent that is a child on a runner takes the notice at its next step, and its prompt carries the guidance', async () => {
    const g = gate()
    const f = setup(transport, [toolCallResponse('p1', 'subagent', { description: 'mid', prompt: 'mid task' }), textResponse('parent done')])
    const mid = new ScriptedModel([toolCallResponse('d1', 'delegate', { description: 'leaf', prompt: 'leaf task' }), toolCallResponse('w1', 'wait_settled', {}), textResponse('mid done')])
    f.host.models.register('mid', mid)
    f.host.models.register('leaf', new ScriptedModel([gated(g, 'leaf answer')]))
    f.host.tools.register(createSubagentTool(f.host, { provider: 'spawn', agentOptions: { provider: 'mid' } }))
    f.host.tools.register(createSubagentTool(f.host, { provider: 'spawn', toolName: 'delegate', backgroundMode: 'continuable', agentOptions: { provider: 'leaf' } }))
    waitTool(f.host, g)
    const leaf = settled(f.host)
    const outcome = await f.parent.run('go')
    expect(outcome.output).toEqual([{ type: 'text', text: 'parent done' }])
    expect(text(results(f.parent.session.events)[0]!)).toBe('mid done')
    const { id, parentId } = await leaf
    expect(mid.requests).toHaveLength(3)
    expect(parentId).not.toBe(f.parent.id)
    expect(lastMessage(mid.requests[2]!)).toEqual({ role: 'user', content: [{ type: 'text', text: `subagent ${id} finished (completed)\nleaf answer` }] })
    expect(mid.requests[0]!.system).toContain('Delegating with delegate: subagents run in the background by default.')
  })

  it('a continuable child ends with the one-shot child that started it: nobody could message it after, and its notices would go nowhere', async () => {
    const g = gate()
    const f = setup(transport, [toolCallResponse('p1', 'subagent', { description: 'mid', prompt: 'mid task' }), textResponse('parent done')])
    f.host.models.register('mid', new ScriptedModel([toolCallResponse('d1', 'delegate', { description: 'leaf', prompt: 'leaf task' }), textResponse('mid done')]))
    f.host.models.register('leaf', new ScriptedModel([gated(g, 'leaf answer')]))
    f.host.tools.register(createSubagentTool(f.host, { provider: 'spawn', agentOptions: { provider: 'mid' } }))
    f.host.tools.register(createSubagentTool(f.host, { provider: 'spawn', toolName: 'delegate', backgroundMode: 'continuable', agentOptions: { provider: 'leaf' } }))
    const leaf = settled(f.host)
    // The foreground call disposes the middle child before it returns, and the leaf, still working, with it.
    expect((await f.parent.run('go')).output).toEqual([{ type: 'text', text: 'parent done' }])
    const { id, stopReason } = await leaf
    expect(stopReason).toBe('aborted')
    expect(f.host.agents.list().map((agent) => agent.id)).toEqual([f.parent.id])
    expect(id).not.toBe(f.parent.id)
    g.open()
  })

  /** P's second activation ('second', answered 'p second'): its first request carries the leaf `id`'s notice, right after its message. */
  async function expectNoticeAtSecondActivation(host: Host, p: { id: string; send(message: string): void }, mid: ScriptedModel, id: string): Promise<void> {
    const secondOfP = settled(host, (s) => s.id === p.id)
    p.send('second')
    expect(await secondOfP).toMatchObject({ activation: 2, output: [{ type: 'text', text: 'p second' }] })
    expect(mid.requests[2]!.messages.slice(-2)).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'second' }] },
      { role: 'user', content: [{ type: 'text', text: `subagent ${id} finished (completed)\nleaf answer` }] },
    ])
  }

  it('an idle continuable parent on a runner finds the notice at its next activation', async () => {
    const g = gate()
    const f = setup(transport, [])
    const mid = new ScriptedModel([toolCallResponse('d1', 'delegate', { description: 'leaf', prompt: 'leaf task' }), textResponse('p first'), textResponse('p second')])
    f.host.models.register('mid', mid)
    f.host.models.register('leaf', new ScriptedModel([gated(g, 'leaf answer')]))
    f.host.tools.register(createSubagentTool(f.host, { provider: 'spawn', toolName: 'delegate', backgroundMode: 'continuable', agentOptions: { provider: 'leaf' } }))
    const firstOfP = settled(f.host)
    const p = await f.host.spawn.startContinuable({ prompt: 'first', parent: f.parent, agentOptions: { provider: 'mid' } })
    expect(await firstOfP).toMatchObject({ id: p.id, activation: 1, output: [{ type: 'text', text: 'p first' }] })
    const leaf = settled(f.host)
    g.open()
    const { id } = await leaf
    expect(mid.requests).toHaveLength(2)
    await expectNoticeAtSecondActivation(f.host, p, mid, id)
    const mirrored = f.host.agents.get(p.id)!.session.events
    const second = mirrored.findIndex((e) => e.type === 'user/message' && (e.data as { content: Array<{ text?: string }> }).content[0]?.text === 'second')
    expect(mirrored[second + 1]).toMatchObject(notice(id, 'leaf answer'))
  })

  it("a continuable parent on its last step when its child settles finds the notice at its next activation: the step that ended it never took it", async () => {
    const g = gate()
    const lastStep = gate()
    const onLastStep = gate()
    const f = setup(transport, [])
    const mid = new ScriptedModel([
      toolCallResponse('d1', 'delegate', { description: 'leaf', prompt: 'leaf task' }),
      async () => (onLastStep.open(), await lastStep.opened, textResponse('p first')),
      textResponse('p second'),
    ])
    f.host.models.register('mid', mid)
    f.host.models.register('leaf', new ScriptedModel([gated(g, 'leaf answer')]))
    f.host.tools.register(createSubagentTool(f.host, { provider: 'spawn', toolName: 'delegate', backgroundMode: 'continuable', agentOptions: { provider: 'leaf' } }))
    const p = await f.host.spawn.startContinuable({ prompt: 'first', parent: f.parent, agentOptions: { provider: 'mid' } })
    await onLastStep.opened
    // The leaf settles while P's last step runs: its notice goes to P's running activation.
    const leaf = settled(f.host, (s) => s.id !== p.id)
    g.open()
    const { id } = await leaf
    const firstOfP = settled(f.host, (s) => s.id === p.id)
    lastStep.open()
    expect(await firstOfP).toMatchObject({ activation: 1, output: [{ type: 'text', text: 'p first' }] })
    await expectNoticeAtSecondActivation(f.host, p, mid, id)
    const notices = f.host.agents.get(p.id)!.session.events.filter((e) => e.type === 'user/message' && (e.data as { source: { kind: string } }).source.kind === 'subagent-settlement')
    expect(notices).toEqual([expect.objectContaining(notice(id, 'leaf answer'))])
  })
})

describe.each(TRANSPORTS)('§13 end to end: a scripted parent works with two continuable children [%s]', (transport) => {
  it('starts two together, keeps working, receives both notices, sends one more work and uses its answer', async () => {
    const gates = { a: gate(), b: gate(), again: gate() }
    const seen: Settlement[] = []
    const textOf = (message: unknown) => ((message as { content: Array<{ type: string; text?: string }> }).content ?? []).map((b) => b.text ?? '').join('')
    const noticesIn = (request: ModelRequest) => request.messages.map(textOf).filter((t) => t.startsWith('subagent '))
    const idOf = (request: ModelRequest, answer: string) => noticesIn(request).map((t) => /^subagent (\S+) finished \(completed\)\n(.*)$/s.exec(t)).find((m) => m?.[2] === answer)![1]!
    let idA = ''
    const parentScript: ScriptEntry[] = [
      toolCallsResponse([
        { id: 'a', name: 'subagent', args: { description: 'research A', prompt: 'find A' } },
        { id: 'b', name: 'subagent', args: { description: 'research B', prompt: 'find B' } },
      ]),
      toolCallResponse('w1', 'work', {}),
      (request) => ((idA = idOf(request, 'A is 42')), toolCallResponse('m1', 'send_message', { subagent_id: idA, message: 'double it' })),
      toolCallResponse('w2', 'work', {}),
      (request) => {
        const doubled = noticesIn(request).at(-1)!.split('\n')[1]!.replace('A doubled is ', '')
        return textResponse(`final: ${doubled} and ${noticesIn(request).find((t) => t.endsWith('B is 7'))!.slice(-1)}`)
      },
    ]
    // One model for both children, answering by task: they run at the same time, in either order.
    const respond: ScriptEntry = async (request) => {
      const first = textOf(request.messages[0])
      const last = textOf(request.messages.at(-1))
      if (first === 'find B') return (await gates.b.opened, textResponse('B is 7'))
      if (last === 'double it') return (await gates.again.opened, textResponse('A doubled is 84'))
      return (await gates.a.opened, textResponse('A is 42'))
    }
    const f = setup(transport, parentScript)
    f.host.models.register('child', new ScriptedModel([respond, respond, respond]))
    f.host.tools.register(createSubagentTool(f.host, { provider: 'spawn', backgroundMode: 'continuable', agentOptions: { provider: 'child' } }))
    f.host.tools.register(createSendMessageTool(f.host))
    f.host.on('subagent/settled', (s) => seen.push(s))
    /** Resolves once `n` settlements came, whenever they came. */
    const settledCount = (n: number) => (seen.length >= n ? Promise.resolve() : new Promise<void>((resolve) => { const off = f.host.on('subagent/settled', () => { if (seen.length >= n) { off(); resolve() } }) }))
    let works = 0
    f.host.tools.register(
      defineTool({
        name: 'work',
        description: 'Does some of the parent\'s own work.',
        parameters: { type: 'object', properties: {}, additionalProperties: false },
        async execute() {
          // The parent's own work lasts as long as its children's: A finishes first, then B; later, A's second task.
          if (++works === 1) {
            gates.a.open()
            await settledCount(1)
            gates.b.open()
            await settledCount(2)
          } else {
            gates.again.open()
            await settledCount(3)
          }
          return 'worked'
        },
      }),
    )

    const outcome = await f.parent.run('research A and B')
    expect(outcome.output).toEqual([{ type: 'text', text: 'final: 84 and 7' }])
    const idB = seen[1]!.id
    expect(seen.map((s) => [s.id, s.activation, s.stopReason, s.lastAssistantMessage])).toEqual([
      [idA, 1, 'completed', 'A is 42'],
      [idB, 1, 'completed', 'B is 7'],
      [idA, 2, 'completed', 'A doubled is 84'],
    ])
    expect(results(f.parent.session.events).map(text)).toEqual([`started subagent ${idA}`, `started subagent ${idB}`, 'worked', `message sent to subagent ${idA}`, 'worked'])
    const requests = f.model.requests
    expect(requests.map(noticesIn)).toEqual([
      [],
      [],
      [`subagent ${idA} finished (completed)\nA is 42`, `subagent ${idB} finished (completed)\nB is 7`],
      [`subagent ${idA} finished (completed)\nA is 42`, `subagent ${idB} finished (completed)\nB is 7`],
      [`subagent ${idA} finished (completed)\nA is 42`, `subagent ${idB} finished (completed)\nB is 7`, `subagent ${idA} finished (completed)\nA doubled is 84`],
    ])
    const sources = f.parent.session.events.filter((e) => e.type === 'user/message').map((e) => (e.data as { source: unknown }).source)
    expect(sources).toEqual([
      { kind: 'user' },
      { kind: 'subagent-settlement', subagentId: idA, activation: 1 },
      { kind: 'subagent-settlement', subagentId: idB, activation: 1 },
      { kind: 'subagent-settlement', subagentId: idA, activation: 2 },
    ])
  })
})

describe('§13 tool configuration refusals', () => {
  it("backgroundMode other than 'one-shot' or 'continuable' is an InvalidOptionError", () => {
    const { host } = setup('inline')
    const error = catchOf(() => createSubagentTool(host, { provider: 'spawn', backgroundMode: 'forever' as 'continuable' }))
    expect(error).toBeInstanceOf(InvalidOptionError)
    expect(error).toMatchObject({ code: 'ERR_SUBAGENT_OPTION', option: 'backgroundMode', message: `backgroundMode must be 'one-shot' or 'continuable', not "forever"` })
  })

  it("'continuable' on a provider without startContinuable is an InvalidOptionError", () => {
    const { host } = setup('inline')
    const custom: SubagentProvider = { name: 'custom', capabilities: host.spawn.capabilities, inheritsParentContext: false, start: (r) => host.spawn.start(r), run: (r) => host.spawn.run(r) }
    const error = catchOf(() => createSubagentTool(host, { provider: custom, backgroundMode: 'continuable' }))
    expect(error).toBeInstanceOf(InvalidOptionError)
    expect(error.message).toBe(`backgroundMode must be 'one-shot' for provider "custom", which has no startContinuable, not "continuable"`)
  })

  it('createSendMessageTool needs a host made by createHost', () => {
    const error = catchOf(() => createSendMessageTool({} as Host))
    expect(error).toBeInstanceOf(TypeError)
    expect(error).toMatchObject({ code: 'ERR_SUBAGENT_ARGUMENT', message: 'createSendMessageTool needs a host made by createHost' })
  })
})

function catchOf(fn: () => unknown): Error {
  try {
    fn()
  } catch (error) {
    return error as Error
  }
  throw new Error('expected a throw')
}
