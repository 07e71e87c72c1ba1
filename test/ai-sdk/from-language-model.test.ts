/**
 * fromLanguageModel: the AI SDK's own mock language models of every spec (v2 of `ai` 5, v3 of
 * `ai` 6, v4 of `ai` 7) as library models, on every transport: registered on the host (reached
 * over the RPC from a worker child) and exported by an agent module (running on the worker thread
 * itself).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { defineTool, type Host, type SessionEvent } from 'subagent-worker'
import { fromLanguageModel, type LanguageModelLike } from 'subagent-worker/ai-sdk'
import { eventOf } from '../support/driver-helpers.js'
import { TRANSPORTS } from '../support/harness.js'
import { AI_SDK_MODULE, callsOf, closeHosts, mockModel, openHost, SPECS, type Part, type Spec, type StreamScript } from './support.js'

const add = defineTool<{ a: number; b: number }>({
  name: 'add',
  description: 'Adds.',
  parameters: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] },
  execute: ({ a, b }) => a + b,
})

afterAll(closeHosts)

describe('fromLanguageModel checks what it is given', () => {
  it('refuses a model id string and an unknown specification, saying what to pass', () => {
    expect(() => fromLanguageModel('openai/gpt-4o' as unknown as LanguageModelLike)).toThrow(/needs an AI SDK language model instance with doStream\(\)/)
    const v1 = { specificationVersion: 'v1', provider: 'p', modelId: 'm', doStream: async () => ({ stream: new ReadableStream() }) }
    expect(() => fromLanguageModel(v1 as unknown as LanguageModelLike)).toThrow('AI SDK language model specification "v1" is not supported: fromLanguageModel handles "v2" (ai 5), "v3" (ai 6) and "v4" (ai 7)')
  })
})

describe.each(TRANSPORTS)('fromLanguageModel, registered on the host [%s]', (transport) => {
  let host: Host
  beforeAll(() => {
    host = openHost(transport)
    host.tools.register(add)
  })

  describe.each(SPECS)('spec %s', (spec: Spec) => {
    let models = 0
    /** A parent routed to a fresh mock model of this spec; its spawned children inherit the model. */
    function fixture(script: StreamScript[], options: { maxTokens?: number } = {}) {
      const model = mockModel(spec, script)
      const name = `${spec}-${models++}`
      host.models.register(name, fromLanguageModel(model))
      return { model, parent: host.createAgent({ options: { provider: name, model: 'ignored', ...options } }) }
    }
    async function spawn(parent: ReturnType<typeof fixture>['parent'], prompt = 'go') {
      const run = await host.spawn.start({ prompt, parent, signal: new AbortController().signal })
      const result = await run.result
      const events: readonly SessionEvent[] = [...host.agents.get(run.id)!.session.events]
      await run.dispose()
      return { result, events }
    }
    const diagnostic = async (script: StreamScript[]) => {
      const { result } = await spawn(fixture(script).parent)
      expect(result.stopReason).toBe('error')
      return result.diagnostic ?? ''
    }

    it('streams text and usage, sending the system prompt, the user message, the tools, maxOutputTokens and the signal', async () => {
      const { model, parent } = fixture([{ text: 'Hello there', usage: { input: 12, output: 3 } }], { maxTokens: 64 })
      const { result, events } = await spawn(parent, 'Say hello')
      expect(result).toMatchObject({ output: [{ type: 'text', text: 'Hello there' }], stopReason: 'completed' })
      expect(events.find((e) => e.type === 'assistant/message')!.data).toEqual({ content: [{ type: 'text', text: 'Hello there' }], usage: { inputTokens: 12, outputTokens: 3 } })
      const [call] = callsOf(model)
      expect(call!.prompt[0]!.role).toBe('system')
      expect(call!.prompt[1]).toEqual({ role: 'user', content: [{ type: 'text', text: 'Say hello' }] })
      expect(call!.tools).toContainEqual({ type: 'function', name: 'add', description: 'Adds.', inputSchema: add.parameters })
      expect(call!.maxOutputTokens).toBe(64)
      expect(call!.abortSignal).toBeInstanceOf(AbortSignal)
    })

    it('a tool call the child runs: the whole call is run on the host, and the call and its result go back in the next prompt', async () => {
      const { model, parent } = fixture([{ calls: [{ id: 'c1', name: 'add', input: { a: 2, b: 3 } }] }, { text: 'It is 5.' }])
      const { result, events } = await spawn(parent, 'add 2 and 3')
      expect(result).toMatchObject({ output: [{ type: 'text', text: 'It is 5.' }], stopReason: 'completed' })
      expect(events.filter((e) => e.type === 'tool/result').map((e) => e.data)).toEqual([{ callId: 'c1', name: 'add', isError: false, content: [{ type: 'text', text: '5' }], value: 5 }])
      expect(callsOf(model)[1]!.prompt.slice(-2)).toEqual([
        { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'add', input: { a: 2, b: 3 } }] },
        { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c1', toolName: 'add', output: { type: 'text', value: '5' } }] },
      ])
    })

    it.each([
      ['stop', 'completed'],
      ['length', 'max-tokens'],
      ['content-filter', 'refusal'],
    ] as const)('finish reason %s is the stop reason %s', async (finish, stopReason) => {
      const { result } = await spawn(fixture([{ text: 'some text', finish }]).parent)
      expect(result.stopReason).toBe(stopReason)
    })

    it.each(spec === 'v2' ? (['error', 'other', 'unknown'] as const) : spec === 'v3' ? (['error', 'other'] as const) : (['error', 'other', 'interrupted'] as const))(
      'finish reason %s cannot be expressed: the run ends error, saying so',
      async (finish) => {
        const said = spec === 'v2' ? '' : ` (the provider said "raw-${finish}")`
        expect(await diagnostic([{ text: 'text', finish }])).toContain(`finished with reason "${finish}"${said}, which a library step cannot express`)
      },
    )

    it('an error part ends the run error with its message; the streamed text survives', async () => {
      const { result } = await spawn(fixture([{ text: 'partial', extra: [{ type: 'error', error: new Error('rate limited') }] }]).parent)
      expect(result).toMatchObject({ stopReason: 'error', output: [{ type: 'text', text: 'partial' }] })
      expect(result.diagnostic).toBe('model stream failed: AI SDK model mock-provider/mock-model-id reported an error in its stream: rate limited')
    })

    it('doStream throwing ends the run error, saying the stream never started', async () => {
      const refused: StreamScript = () => Promise.reject(new Error('connection refused'))
      expect(await diagnostic([refused])).toBe('model stream failed: AI SDK model mock-provider/mock-model-id failed to start streaming: connection refused')
    })

    it('a stream that fails while read ends the run error, saying so', async () => {
      const broken: StreamScript = async () => ({
        stream: new ReadableStream<Part>({
          start(controller) {
            controller.enqueue({ type: 'text-delta', id: 't', delta: 'half' })
            controller.error(new Error('socket hang up'))
          },
        }),
      })
      expect(await diagnostic([broken])).toBe("model stream failed: AI SDK model mock-provider/mock-model-id's stream failed: socket hang up")
    })

    it('a stream that ends without a finish part ends the run error, never a silent success', async () => {
      expect(await diagnostic([{ text: 'half an answer', noFinish: true }])).toBe(
        "model stream failed: AI SDK model mock-provider/mock-model-id's stream ended without a finish part, so the step may be incomplete",
      )
    })

    it("cancellation: the parent's signal aborts the model's call and cancels its stream at once", async () => {
      let cancel!: () => void
      const cancelled = new Promise<void>((resolve) => (cancel = resolve))
      const hanging: StreamScript = async () => ({
        stream: new ReadableStream<Part>({
          start(controller) {
            controller.enqueue({ type: 'text-delta', id: 't', delta: 'partial' })
          },
          cancel() {
            cancel()
          },
        }),
      })
      const { model, parent } = fixture([hanging])
      const controller = new AbortController()
      const run = await host.spawn.start({ prompt: 'go', parent, signal: controller.signal })
      await eventOf(run, 'assistant/chunk')
      controller.abort()
      const result = await run.result
      // At once: the stream is cancelled (the test's timeout bounds the wait) and no grace ran out,
      // which would have said so in a diagnostic, so the cancel came from the signal.
      await cancelled
      expect(result).toMatchObject({ stopReason: 'aborted', output: [{ type: 'text', text: 'partial' }] })
      expect(result.diagnostic).toBeUndefined()
      expect(callsOf(model)[0]!.abortSignal!.aborted).toBe(true)
      await run.dispose()
    })
  })
})

describe.each(TRANSPORTS)('fromLanguageModel in an agent module [%s]', (transport) => {
  let host: Host
  beforeAll(() => {
    host = openHost(transport, { agentModule: AI_SDK_MODULE })
    host.tools.register(add)
  })

  it.each(SPECS)('a module model (%s) runs where the child runs and calls a module tool and a host tool', async (spec) => {
    const parent = host.createAgent({ options: { provider: `ai-${spec}`, model: 'ignored' } })
    const run = await host.spawn.start({ prompt: 'use your tools', parent, signal: new AbortController().signal })
    const result = await run.result
    await run.dispose()
    expect(result).toMatchObject({
      stopReason: 'completed',
      output: [{ type: 'text', text: `${spec} on a worker thread: ${transport === 'worker' || transport === 'bullmq'}; module_echo=module says ping, add=5` }],
    })
  })
})
