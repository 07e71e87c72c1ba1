/**
 * delegationTool: the library's `subagent` tool driven by the real `generateText` of `ai` 5 and
 * `ai` 6 (their mock language models as the parent's model), on every transport.
 */
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest'
import { z } from 'zod'
import { jsonSchema } from 'ai'
import { ScriptedModel, textResponse, toolCallResponse, type Host, type ScriptEntry, type SubagentEndEvent } from 'subagent-worker'
import { delegationTool, fromLanguageModel, jobTools, type StructuredOf } from 'subagent-worker/ai-sdk'
import { TRANSPORTS } from '../support/harness.js'
import { continuablesOf } from '../../dist/parent/driver/continuable/continuables.js'
import { generate, lastToolOutput, VERSIONS, type Version } from './parents.js'
import { closeHosts, mockModel, openHost } from './support.js'

afterAll(closeHosts)

const call = (input: Record<string, unknown>, name = 'subagent') => ({ calls: [{ id: 'd1', name, input: { description: 'a task', ...input } }] })
const CITY = { type: 'object', properties: { city: { type: 'string' }, population: { type: 'integer' } }, required: ['city', 'population'], additionalProperties: false } as const

describe.each(TRANSPORTS)('delegationTool [%s]', (transport) => {
  let host: Host
  const ended: SubagentEndEvent[] = []
  beforeAll(() => {
    host = openHost(transport)
    host.on('subagent/end', (event) => ended.push(event))
  })
  let models = 0
  /** Registers a child model under a fresh name; children are routed to it by agentOptions. */
  const childModel = (model: ScriptedModel | ReturnType<typeof fromLanguageModel>) => {
    const name = `child-${models++}`
    host.models.register(name, model)
    return name
  }
  const scripted = (script: ScriptEntry[]) => {
    const model = new ScriptedModel(script)
    return { model, provider: childModel(model) }
  }
  /** No child is left in the registry: every run was disposed. */
  const noChildren = () => expect(host.agents.list().filter((agent) => agent.session.header.origin === 'subagent')).toEqual([])

  describe.each(VERSIONS)('driven by generateText of %s', (version: Version) => {
    it('the parent model calls the tool, the child answers, and the parent model gets its text', async () => {
      const child = scripted([textResponse('the answer is 42')])
      const subagent = delegationTool(host, { provider: 'spawn', agentOptions: { provider: child.provider } })
      const run = await generate(version, [call({ prompt: 'find the answer' }), { text: 'parent done' }], { prompt: 'delegate', tools: { subagent } })
      expect(run.text).toBe('parent done')
      expect(run.outcomes).toEqual([{ output: 'the answer is 42' }])
      expect(lastToolOutput(run.prompts[1])).toEqual({ type: 'text', value: 'the answer is 42' })
      expect(child.model.requests[0]!.messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'find the answer' }] }])
      noChildren()
    })

    it('a child whose model is an AI SDK mock (through fromLanguageModel) answers too', async () => {
      const provider = childModel(fromLanguageModel(mockModel(version === 'ai 5' ? 'v2' : 'v3', [{ text: 'mock child answer' }])))
      const subagent = delegationTool(host, { provider: 'spawn', agentOptions: { provider } })
      const run = await generate(version, [call({ prompt: 'go' }), { text: 'parent done' }], { prompt: 'delegate', tools: { subagent } })
      expect(lastToolOutput(run.prompts[1])).toEqual({ type: 'text', value: 'mock child answer' })
    })

    it('a failing child gives the tool error text the subagent tool gives', async () => {
      const subagent = delegationTool(host, { provider: 'spawn', agentOptions: { provider: 'nowhere' } })
      const run = await generate(version, [call({ prompt: 'go' }), { text: 'parent done' }], { prompt: 'delegate', tools: { subagent } })
      const text = 'subagent run failed\nDiagnostic: no model registered under provider "nowhere"'
      expect(run.outcomes).toEqual([{ error: text }])
      expect(lastToolOutput(run.prompts[1])).toEqual({ type: 'error-text', value: text })
      noChildren()
    })

    it('config as createSubagentTool\'s: without agentOptions.provider a child of a parent built from messages has no model, and the model reads so', async () => {
      const subagent = delegationTool(host, { provider: 'spawn' })
      const run = await generate(version, [call({ prompt: 'go' }), { text: 'parent done' }], { prompt: 'delegate', tools: { subagent } })
      expect(run.outcomes).toEqual([{ error: 'subagent run failed\nDiagnostic: the agent has no model: set options.provider to a registered model name' }])
      noChildren()
    })

    it('with outputSchema as JSON Schema the child reports a structured value, which the parent gets', async () => {
      const child = scripted([toolCallResponse('s1', 'structured_output', { city: 'Paris', population: 2100000 })])
      const extract = delegationTool(host, { provider: 'spawn', agentOptions: { provider: child.provider }, outputSchema: CITY })
      const run = await generate(version, [call({ prompt: 'which city?' }, 'extract'), { text: 'parent done' }], { prompt: 'delegate', tools: { extract } })
      expect(run.outcomes).toEqual([{ output: { city: 'Paris', population: 2100000 } }])
      expect(lastToolOutput(run.prompts[1])).toEqual({ type: 'json', value: { city: 'Paris', population: 2100000 } })
      expect(child.model.requests[0]!.tools!.find((tool) => tool.name === 'structured_output')!.parameters).toEqual(CITY)
      noChildren()
    })

    it('with outputSchema as a zod 4 schema the same holds, and the value is typed by the schema', async () => {
      const schema = z.object({ city: z.string(), population: z.number().int() })
      expectTypeOf<StructuredOf<typeof schema>>().toEqualTypeOf<{ city: string; population: number }>()
      const child = scripted([toolCallResponse('s1', 'structured_output', { city: 'Lyon', population: 520000 })])
      const extract = delegationTool(host, { provider: 'spawn', agentOptions: { provider: child.provider }, outputSchema: schema })
      const run = await generate(version, [call({ prompt: 'which city?' }, 'extract'), { text: 'parent done' }], { prompt: 'delegate', tools: { extract } })
      expect(run.outcomes).toEqual([{ output: { city: 'Lyon', population: 520000 } }])
      expect(child.model.requests[0]!.tools!.find((tool) => tool.name === 'structured_output')!.parameters).toMatchObject({
        type: 'object',
        properties: { city: { type: 'string' }, population: { type: 'integer' } },
        required: ['city', 'population'],
      })
    })

    it("the AI SDK's abortSignal cancels the child, which is disposed before the tool returns", async () => {
      const child = scripted(['hang'])
      const subagent = delegationTool(host, { provider: 'spawn', agentOptions: { provider: child.provider } })
      const controller = new AbortController()
      const stop = host.on('subagent/start', () => controller.abort())
      const before = ended.length
      const run = generate(version, [call({ prompt: 'go' }), { text: 'parent done' }], { prompt: 'delegate', tools: { subagent }, abortSignal: controller.signal })
      // generateText waits for the cancelled call to return, then ends with the abort.
      await expect(run).rejects.toMatchObject({ name: 'AbortError' })
      stop()
      expect(ended.slice(before).map((event) => event.stopReason)).toEqual(['aborted'])
      noChildren()
    })
  })

  it('an invalid call reads as the library says it (ai 5 and 6 alike run the check)', async () => {
    for (const version of VERSIONS) {
      const subagent = delegationTool(host, { provider: 'spawn', agentOptions: { provider: 'unused' } })
      const run = await generate(version, [call({}), { text: 'parent done' }], { prompt: 'delegate', tools: { subagent } })
      expect(run.outcomes).toEqual([{ error: expect.stringContaining(`invalid arguments for "subagent": missing property "prompt"`) }])
    }
  })

  it('background: the call returns a job id at once, and job_output of jobTools collects the answer', async () => {
    const child = scripted([{ delayMs: 30, chunks: textResponse('background answer') }])
    const tools = {
      subagent: delegationTool(host, { provider: 'spawn', agentOptions: { provider: child.provider }, parentId: 'ai-sdk-parent' }),
      ...jobTools(host, { parentId: 'ai-sdk-parent' }),
    }
    let jobId = ''
    const run = await generate(
      'ai 6',
      [
        call({ prompt: 'take your time', run_in_background: true }),
        (prompt) => {
          jobId = /job (job-\d+)/.exec(String((lastToolOutput(prompt) as { value: string }).value))![1]!
          return { calls: [{ id: 'o1', name: 'job_output', input: { job_id: jobId, wait: true } }] }
        },
        { text: 'parent done' },
      ],
      { prompt: 'delegate', tools },
    )
    expect(run.outcomes).toEqual([{ output: `started background subagent job ${jobId}` }, { output: `job ${jobId} completed:\nbackground answer` }])
    expect(host.jobs.get(jobId)).toMatchObject({ owner: 'ai-sdk-parent', status: 'completed' })
    // The job settles once its child was disposed: nothing of it is left in host.agents then.
    await host.jobs.wait(jobId)
    noChildren()
  })

  it("backgroundMode 'continuable': the call starts a continuable child ('started subagent <id>'), which settles with its answer", async () => {
    const child = scripted([textResponse('continuable answer')])
    const tools = { subagent: delegationTool(host, { provider: 'spawn', backgroundMode: 'continuable', agentOptions: { provider: child.provider }, parentId: 'ai-sdk-continuable' }) }
    const settled = new Promise<{ id: string; output: unknown }>((resolve) => {
      const off = host.on('subagent/settled', (settlement) => {
        if (settlement.parentId !== 'ai-sdk-continuable') return
        off()
        resolve(settlement)
      })
    })
    const run = await generate('ai 6', [call({ prompt: 'keep going' }), { text: 'parent done' }], { prompt: 'delegate', tools })
    const { id, output } = await settled
    expect(run.outcomes).toEqual([{ output: `started subagent ${id}` }])
    expect(output).toEqual([{ type: 'text', text: 'continuable answer' }])
    const live = continuablesOf(host)?.lookup(id)
    if (live?.kind === 'live') await live.run.dispose()
  })

  it('refuses a config it cannot serve, saying what to do', () => {
    expect(() => delegationTool(host, { provider: 'spawn', agentOptions: { provider: 'x' }, outputSchema: CITY, enableRunInBackground: true })).toThrow(
      'delegationTool with outputSchema runs in the foreground only: leave enableRunInBackground unset or false',
    )
    expect(() => delegationTool(host, { provider: 'spawn', agentOptions: { provider: 'x' }, outputSchema: jsonSchema({ type: 'string' }) })).toThrow(
      'delegationTool outputSchema must be a JSON Schema object with "type": "object" at its root',
    )
  })
})
