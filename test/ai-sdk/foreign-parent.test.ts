/**
 * The adapter's promise, end to end: a parent written only with the AI SDK (`streamText` of
 * `ai` 6, its mock model standing in for a provider's) delegates to children on worker threads
 * through three `delegationTool`s: a spawn, a fork that sees the conversation, and a structured
 * extraction. The parent's code below is everything it needs: no adapter code of its own.
 */
import { afterAll, describe, expect, it } from 'vitest'
import { streamText, stepCountIs, type ModelMessage } from 'ai'
import { MockLanguageModelV3 } from 'ai/test'
import { z } from 'zod'
import type { SubagentEndEvent, SubagentStartEvent } from 'subagent-worker'
import { delegationTool, fromLanguageModel } from 'subagent-worker/ai-sdk'
import { closeHosts, openHost, v3Stream, type Call, type Reply } from './support.js'
import type { TransportName } from '../support/harness.js'

afterAll(closeHosts)

const textOf = (message: Call['prompt'][number]) =>
  typeof message.content === 'string' ? message.content : (message.content as Array<{ type: string; text?: string }>).map((part) => part.text ?? '').join('')

/** The children's model (an AI SDK model too): it answers from what its prompt shows it. */
function childReply({ prompt, tools }: Call): Reply {
  const users = prompt.filter((message) => message.role === 'user').map(textOf)
  const task = users[users.length - 1]!
  if (tools?.some((tool) => tool.name === 'structured_output')) {
    const [, name, city] = /(\w+) from (\w+)/.exec(task)!
    return { calls: [{ id: 's1', name: 'structured_output', input: { name, city } }] }
  }
  return { text: users.length > 1 ? `forked: you said "${users[0]}"` : `fresh: I only know "${task}"` }
}

/** The parent's model: all three delegations in one step, then an answer built from their results. */
function parentReply({ prompt }: Call): Reply {
  const last = prompt[prompt.length - 1]!
  if (last.role !== 'tool') {
    return {
      calls: [
        { id: 'r1', name: 'research', input: { description: 'research', prompt: 'Find facts about Paris.' } },
        { id: 'r2', name: 'recall', input: { description: 'recall', prompt: 'What did the user tell us?' } },
        { id: 'r3', name: 'extract', input: { description: 'extract', prompt: 'Extract from: I am Ada from Paris.' } },
      ],
    }
  }
  const said = Object.fromEntries((last.content as Array<{ toolName: string; output: { value: unknown } }>).map((part) => [part.toolName, part.output.value]))
  return { text: `research: ${said['research']} | recall: ${said['recall']} | extract: ${JSON.stringify(said['extract'])}` }
}

async function scenario(isolation: TransportName) {
  const host = openHost(isolation)
  const started: SubagentStartEvent[] = []
  const ended: SubagentEndEvent[] = []
  host.on('subagent/start', (event) => started.push(event))
  host.on('subagent/end', (event) => ended.push(event))
  const childModel = new MockLanguageModelV3({ doStream: async (options) => ({ stream: v3Stream(childReply(options as Call)) }) })
  const parentModel = new MockLanguageModelV3({ doStream: async (options) => ({ stream: v3Stream(parentReply(options as Call)) }) })

  // ---- The parent: plain AI SDK code, plus the tools the adapter gives it. ----
  host.models.register('gpt', fromLanguageModel(childModel))
  const tools = {
    research: delegationTool(host, { provider: 'spawn', agentOptions: { provider: 'gpt' } }),
    recall: delegationTool(host, { provider: 'fork', agentOptions: { provider: 'gpt' } }),
    extract: delegationTool(host, { provider: 'spawn', agentOptions: { provider: 'gpt' }, outputSchema: z.object({ name: z.string(), city: z.string() }) }),
  }
  const messages: ModelMessage[] = [
    { role: 'user', content: 'I am Ada from Paris.' },
    { role: 'assistant', content: 'Nice to meet you, Ada.' },
    { role: 'user', content: 'Research, recall and extract.' },
  ]
  const result = streamText({ model: parentModel, messages, tools, stopWhen: stepCountIs(2) })
  const text = await result.text
  // ---- End of the parent. ----

  return { host, started, ended, childModel, text, steps: await result.steps }
}

describe('a foreign parent on the AI SDK', () => {
  it('A foreign parent built on the AI SDK spawns, forks and gets structured output from worker-thread children with no adapter code of its own', async () => {
    const { host, started, ended, childModel, text, steps } = await scenario('worker')
    expect(text).toBe('research: fresh: I only know "Find facts about Paris." | recall: forked: you said "I am Ada from Paris." | extract: {"name":"Ada","city":"Paris"}')
    // Three children, each on a worker thread, each completed and disposed.
    expect(started.map((event) => [event.provider, event.local])).toEqual(expect.arrayContaining([['spawn', false], ['fork', false], ['spawn', false]]))
    expect(started).toHaveLength(3)
    expect(ended.map((event) => event.stopReason)).toEqual(['completed', 'completed', 'completed'])
    expect(host.agents.list()).toEqual([])
    // The structured value reached the parent as a value, not as text.
    expect(steps[0]!.toolResults.find((result) => result.toolName === 'extract')!.output).toEqual({ name: 'Ada', city: 'Paris' })
    // The fork saw the conversation's completed turn, and not the turn in flight.
    const forkCall = childModel.doStreamCalls.find((call) => (call.prompt as Call['prompt']).some((message) => textOf(message) === 'What did the user tell us?'))!
    expect((forkCall.prompt as Call['prompt']).slice(1).map((message) => [message.role, textOf(message)])).toEqual([
      ['user', 'I am Ada from Paris.'],
      ['assistant', 'Nice to meet you, Ada.'],
      ['user', 'What did the user tell us?'],
    ])
  })

  it('the same parent code delegates to inline children alike', async () => {
    const { started, text } = await scenario('inline')
    expect(text).toBe('research: fresh: I only know "Find facts about Paris." | recall: forked: you said "I am Ada from Paris." | extract: {"name":"Ada","city":"Paris"}')
    expect(started.every((event) => event.local)).toBe(true)
  })

  it('and to children in sandboxed child processes alike', async () => {
    const { started, ended, text } = await scenario('process')
    expect(text).toBe('research: fresh: I only know "Find facts about Paris." | recall: forked: you said "I am Ada from Paris." | extract: {"name":"Ada","city":"Paris"}')
    expect(started.map((event) => event.local)).toEqual([false, false, false])
    expect(ended.map((event) => event.stopReason)).toEqual(['completed', 'completed', 'completed'])
  })
})
