/**
 * parentFromMessages: an AI SDK history as a parent view whose events are the library's session
 * events, so `host.fork` seeds a child with the conversation, on every transport.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ModelMessage } from 'ai'
import type { ModelMessage as Ai5ModelMessage } from 'ai5'
import type { ModelMessage as Ai7ModelMessage } from 'ai7'
import { ScriptedModel, SubagentDepthError, textResponse, type Host, type SessionEvent } from 'subagent-worker'
import { parentFromMessages } from 'subagent-worker/ai-sdk'
import { TRANSPORTS } from '../support/harness.js'
import { closeHosts, openHost } from './support.js'

afterAll(closeHosts)

const OMITTED_IMAGE = '[image part omitted: subagent sessions carry only text and tool calls]'

/** Two completed turns, then a third still waiting for its model (what the AI SDK's execute sees). */
const history: ModelMessage[] = [
  { role: 'system', content: 'You are the parent.' },
  { role: 'user', content: 'My name is Ada.' },
  { role: 'assistant', content: [{ type: 'reasoning', text: 'a greeting' }, { type: 'text', text: 'Hello Ada.' }] },
  { role: 'user', content: [{ type: 'text', text: 'Look up order 7.' }, { type: 'image', image: new URL('https://example.com/receipt.png') }] },
  { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'lookup', input: { order: 7 } }] },
  { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c1', toolName: 'lookup', output: { type: 'json', value: { status: 'shipped' } } }] },
  { role: 'assistant', content: 'It has shipped.' },
  { role: 'user', content: 'Now refund it.' },
]

const types = (events: readonly SessionEvent[]) => events.map((event) => event.type)
const data = (events: readonly SessionEvent[], type: string) => events.filter((event) => event.type === type).map((event) => event.data)

describe('parentFromMessages', () => {
  let host: Host
  beforeAll(() => {
    host = openHost('inline')
  })

  it('maps the history to session events: completed turns closed by turn/end, the turn in flight left open', () => {
    const view = parentFromMessages(host, history)
    const { events } = view.session
    expect(types(events)).toEqual([
      'turn/start', 'user/message', 'assistant/message', 'turn/end',
      'turn/start', 'user/message', 'assistant/message', 'tool/result', 'assistant/message', 'turn/end',
      'turn/start', 'user/message',
    ]) // prettier-ignore
    expect(events.map((event) => event.seq)).toEqual(events.map((_, i) => i))
    expect(data(events, 'user/message')).toEqual([
      { content: [{ type: 'text', text: 'My name is Ada.' }], source: { kind: 'user' } },
      { content: [{ type: 'text', text: 'Look up order 7.' }, { type: 'text', text: OMITTED_IMAGE }], source: { kind: 'user' } },
      { content: [{ type: 'text', text: 'Now refund it.' }], source: { kind: 'user' } },
    ])
    expect(data(events, 'assistant/message')).toEqual([
      { content: [{ type: 'text', text: 'Hello Ada.' }] },
      { content: [{ type: 'tool-call', id: 'c1', name: 'lookup', arguments: '{"order":7}' }] },
      { content: [{ type: 'text', text: 'It has shipped.' }] },
    ])
    expect(data(events, 'tool/result')).toEqual([{ callId: 'c1', name: 'lookup', isError: false, content: [{ type: 'text', text: '{"status":"shipped"}' }] }])
    expect(data(events, 'turn/end')).toEqual([{ reason: { kind: 'completed' } }, { reason: { kind: 'completed' } }])
    expect(view.id).toMatch(/^ai-sdk-/)
    expect(view.options).toEqual({})
    expect(view.session.header).toEqual({ type: 'session', id: view.id, createdAt: expect.any(String) })
  })

  it('a history ending with an answer is a completed turn; failed, denied and provider-executed parts map as documented', () => {
    const view = parentFromMessages(host, [
      { role: 'user', content: 'hi' },
      {
        role: 'assistant',
        content: [
          { type: 'tool-call', toolCallId: 'p1', toolName: 'web_search', input: {}, providerExecuted: true },
          { type: 'tool-result', toolCallId: 'p1', toolName: 'web_search', output: { type: 'text', value: 'found' } },
          { type: 'tool-call', toolCallId: 'c2', toolName: 'run', input: {} },
          { type: 'tool-call', toolCallId: 'c3', toolName: 'rm', input: {} },
        ],
      },
      {
        role: 'tool',
        content: [
          { type: 'tool-result', toolCallId: 'c2', toolName: 'run', output: { type: 'error-text', value: 'boom' } },
          { type: 'tool-result', toolCallId: 'c3', toolName: 'rm', output: { type: 'execution-denied', reason: 'not allowed' } },
        ],
      },
      { role: 'assistant', content: 'Done.' },
    ])
    const { events } = view.session
    expect(types(events)).toEqual(['turn/start', 'user/message', 'assistant/message', 'tool/result', 'tool/result', 'assistant/message', 'turn/end'])
    expect(data(events, 'assistant/message')[0]).toEqual({
      content: [
        { type: 'tool-call', id: 'c2', name: 'run', arguments: '{}' },
        { type: 'tool-call', id: 'c3', name: 'rm', arguments: '{}' },
      ],
    })
    expect(data(events, 'tool/result')).toEqual([
      { callId: 'c2', name: 'run', isError: true, code: 'FAILED', content: [{ type: 'text', text: 'boom' }] },
      { callId: 'c3', name: 'rm', isError: true, code: 'DENIED', content: [{ type: 'text', text: 'not allowed' }] },
    ])
  })

  it('takes ai 5 and ai 7 messages too, and refuses what is not a message, saying where', () => {
    const old: Ai5ModelMessage[] = [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'hello' },
    ]
    const current: Ai7ModelMessage[] = [
      { role: 'user', content: [{ type: 'text', text: 'hi' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'hello' }] },
    ]
    expect(types(parentFromMessages(host, old).session.events)).toEqual(['turn/start', 'user/message', 'assistant/message', 'turn/end'])
    expect(types(parentFromMessages(host, current).session.events)).toEqual(['turn/start', 'user/message', 'assistant/message', 'turn/end'])
    expect(() => parentFromMessages(host, [{ role: 'robot', content: 'x' } as unknown as ModelMessage])).toThrow(
      'messages[0] has the role "robot": AI SDK messages are system, user, assistant or tool',
    )
  })

  it("the host: an id naming one of its agents keeps that agent's depth and options, so maxDepth still holds", async () => {
    const agent = host.createAgent({ options: { provider: 'somewhere', model: 'm' }, header: { delegationDepth: 2 } })
    const view = parentFromMessages(host, [{ role: 'user', content: 'hi' }], { id: agent.id })
    expect(view.session.header.delegationDepth).toBe(2)
    expect(view.options).toEqual({ provider: 'somewhere', model: 'm' })
    const start = host.spawn.start({ prompt: 'go deeper', parent: view, maxDepth: 2, signal: new AbortController().signal })
    await expect(start).rejects.toBeInstanceOf(SubagentDepthError)
    await expect(start).rejects.toThrow('subagent depth 3 exceeds maxDepth 2')
  })
})

describe.each(TRANSPORTS)('a fork from an AI SDK history [%s]', (transport) => {
  it('seeds the child with the completed turns, which its first model request carries, and the child answers', async () => {
    const host = openHost(transport)
    const model = new ScriptedModel([textResponse('Your name is Ada, and order 7 has shipped.')])
    host.models.register('child', model)
    const parent = parentFromMessages(host, history, { options: { provider: 'child', model: 'child-1' } })
    const run = await host.fork.start({ prompt: 'What do you know about me?', parent, signal: new AbortController().signal })
    const result = await run.result
    const child = host.agents.get(run.id)!
    expect(child.session.header.seedLength).toBe(10)
    expect(child.session.events.slice(0, 10)).toEqual(parent.session.events.slice(0, 10))
    await run.dispose()
    expect(result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'Your name is Ada, and order 7 has shipped.' }] })
    expect(model.requests[0]!.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'My name is Ada.' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'Hello Ada.' }] },
      { role: 'user', content: [{ type: 'text', text: 'Look up order 7.' }, { type: 'text', text: OMITTED_IMAGE }] },
      { role: 'assistant', content: [{ type: 'tool-call', id: 'c1', name: 'lookup', arguments: '{"order":7}' }] },
      { role: 'tool', callId: 'c1', name: 'lookup', isError: false, content: [{ type: 'text', text: '{"status":"shipped"}' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'It has shipped.' }] },
      // The turn in flight ("Now refund it.") is never copied; the fork's prompt follows the seed.
      { role: 'user', content: [{ type: 'text', text: 'What do you know about me?' }] },
    ])
  })
})
