/**
 * delegationTool streams the child's progress as preliminary tool results (the AI SDK's
 * async-generator `execute`): the real `streamText` of `ai` 5 and `ai` 6 shows the child's text
 * growing, then the final result as today, on every transport.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { stepCountIs as stepCountIs6, streamText as streamText6, type ToolSet } from 'ai'
import { stepCountIs as stepCountIs5, streamText as streamText5, type ToolSet as ToolSet5 } from 'ai5'
import { ScriptedModel, type Host, type StreamChunk } from 'subagent-worker'
import { delegationTool } from 'subagent-worker/ai-sdk'
import { TRANSPORTS } from '../support/harness.js'
import { VERSIONS, type Version } from './parents.js'
import { closeHosts, mockModel, openHost } from './support.js'
import type { MockLanguageModelV2 } from 'ai5/test'
import type { MockLanguageModelV3 } from 'ai/test'

afterAll(closeHosts)

const DELTAS = ['The ', 'answer ', 'is ', '42.']
const ANSWER = DELTAS.join('')
const streamed: StreamChunk[] = [...DELTAS.map((text): StreamChunk => ({ type: 'text-delta', text })), { type: 'usage', inputTokens: 1, outputTokens: 4 }, { type: 'finish', reason: 'stop' }]

interface ToolResultPart {
  type: string
  toolCallId?: string
  output?: unknown
  preliminary?: boolean
}

/** Runs a streamText parent that calls `subagent` once; returns every tool-result part, in order. */
async function streamParent(version: Version, tools: Record<string, unknown>, background = false): Promise<ToolResultPart[]> {
  const parentScript = [{ calls: [{ id: 'd1', name: 'subagent', input: { description: 'find it', prompt: 'find the answer', ...(background ? { run_in_background: true } : {}) } }] }, { text: 'parent done' }]
  const parts: ToolResultPart[] = []
  if (version === 'ai 6') {
    const model = mockModel('v3', parentScript) as MockLanguageModelV3
    const result = streamText6({ model, prompt: 'delegate', tools: tools as ToolSet, stopWhen: stepCountIs6(3) })
    for await (const part of result.fullStream) if (part.type === 'tool-result' || part.type === 'tool-error') parts.push(part as ToolResultPart)
  } else {
    const model = mockModel('v2', parentScript) as MockLanguageModelV2
    const result = streamText5({ model, prompt: 'delegate', tools: tools as unknown as ToolSet5, stopWhen: stepCountIs5(3) })
    for await (const part of result.fullStream) if (part.type === 'tool-result' || part.type === 'tool-error') parts.push(part as ToolResultPart)
  }
  return parts
}

describe.each(TRANSPORTS)('delegationTool progress [%s]', (transport) => {
  let host: Host
  let models = 0
  beforeAll(() => {
    host = openHost(transport)
  })
  const child = (script: ConstructorParameters<typeof ScriptedModel>[0]) => {
    const name = `child-${models++}`
    host.models.register(name, new ScriptedModel(script))
    return name
  }

  describe.each(VERSIONS)('streamText of %s', (version) => {
    it("shows the child's text growing as preliminary results, then the final result as today", async () => {
      const subagent = delegationTool(host, { provider: 'spawn', agentOptions: { provider: child([streamed]) } })
      const parts = await streamParent(version, { subagent })
      const preliminary = parts.filter((p) => p.preliminary === true).map((p) => p.output as string)
      const final = parts.filter((p) => p.preliminary !== true)
      expect(final).toMatchObject([{ type: 'tool-result', toolCallId: 'd1', output: ANSWER }])
      // The AI SDK shows every yielded value as preliminary, the final one too. Before it, each is
      // a longer prefix of the answer (a transport may merge deltas, so there may be fewer).
      expect(preliminary.at(-1)).toBe(ANSWER)
      const progress = preliminary.slice(0, -1)
      expect(progress.length).toBeGreaterThan(0)
      progress.forEach((text, i) => {
        expect(ANSWER.startsWith(text)).toBe(true)
        if (i > 0) expect(text.length).toBeGreaterThan(progress[i - 1]!.length)
      })
      if (transport === 'inline') expect(progress).toEqual(['The ', 'The answer ', 'The answer is ', ANSWER])
    })

    it('a background call and a failing child show no progress, only what they give today', async () => {
      const background = delegationTool(host, { provider: 'spawn', agentOptions: { provider: child(['hang']) } })
      const started = await streamParent(version, { subagent: background }, true)
      const text = started[1]?.output as string
      expect(text).toMatch(/^started background subagent job job-\d+$/)
      // The final value, shown once as preliminary (as the AI SDK shows every yield), then as the result.
      expect(started).toMatchObject([{ type: 'tool-result', output: text, preliminary: true }, { type: 'tool-result', output: text }])
      expect(started[1]!.preliminary).toBeUndefined()
      await host.jobs.kill(text.split(' ').at(-1)!)
      const failing = delegationTool(host, { provider: 'spawn', agentOptions: { provider: 'nowhere' } })
      const failed = await streamParent(version, { subagent: failing })
      expect(failed).toMatchObject([{ type: 'tool-error' }])
    })
  })
})
