// CONTRACT.md §3 (Result extraction): output selection, stop-reason mapping, diagnostics.
import { afterEach, describe, expect, it } from 'vitest'
import {
  defineTool,
  maxTokensResponse,
  refusalResponse,
  textResponse,
  toolCallResponse,
  truncateDiagnostic,
  type Model,
  type ScriptEntry,
  type StreamChunk,
} from 'subagent-worker'
import { closeHosts, eventsOf, setup, signal, streamedRuns, TRANSPORTS, type Fixture } from '../support/harness.js'
import { childEvents, eventsUntil } from '../support/driver-helpers.js'
import { gate } from '../support/loop-helpers.js'

afterEach(closeHosts)

const MARK = '\n[diagnostic truncated]'
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

function alphaTool(onRun: () => void = () => {}) {
  return defineTool({
    name: 'alpha',
    description: 'alpha tool',
    parameters: { type: 'object', properties: {} },
    execute: () => {
      onRun()
      return 'alpha ran'
    },
  })
}

/** A host-placed model that streams `texts` and then fails with `error`. */
function failingModel(texts: string[], error: Error): Model {
  return {
    async *stream() {
      for (const text of texts) yield { type: 'text-delta', text } satisfies StreamChunk
      throw error
    },
  }
}

async function runOnce(fx: Fixture, options: { agentOptions?: { provider?: string; model?: string } } = {}) {
  const run = await fx.host.spawn.start({ prompt: 'go', parent: fx.parent, signal: signal(), ...options })
  const result = await run.result
  const events = [...childEvents(fx.host, run)]
  await run.dispose()
  return { run, result, events }
}

describe.each(TRANSPORTS)('§3 output selection [%s]', (transport) => {
  it('§3 output is the content of the last assistant message with non-empty content', async () => {
    const fx = setup(transport, [toolCallResponse('c1', 'alpha', {}, 'step one'), textResponse('final answer')])
    fx.host.tools.register(alphaTool())
    const { result } = await runOnce(fx)
    expect(result).toEqual({ output: [{ type: 'text', text: 'final answer' }], usage: { inputTokens: 0, outputTokens: 4 }, totalUsage: { inputTokens: 0, outputTokens: 4 }, stopReason: 'completed' })
  })

  it("§3 output is that message's whole content, tool-call blocks included (a tool concluded the turn)", async () => {
    const fx = setup(transport, [toolCallResponse('c1', 'finish', { x: 1 }, 'wrapping up'), textResponse('never')])
    fx.host.tools.register(
      defineTool({
        name: 'finish',
        description: 'concludes the turn',
        parameters: { type: 'object', properties: { x: { type: 'number' } } },
        execute: (_args, exec) => {
          exec.concludeTurn()
          return 'finished'
        },
      }),
    )
    const { result } = await runOnce(fx)
    expect(result).toEqual({
      output: [
        { type: 'text', text: 'wrapping up' },
        { type: 'tool-call', id: 'c1', name: 'finish', arguments: JSON.stringify({ x: 1 }) },
      ],
      usage: { inputTokens: 0, outputTokens: 2 }, totalUsage: { inputTokens: 0, outputTokens: 2 }, stopReason: 'completed',
    })
    expect(fx.model.requests).toHaveLength(1)
  })

  it('§3 an empty (usage-only) message after a max-tokens step is skipped; its cut-off tool call never runs', async () => {
    let ran = 0
    const cutOff: StreamChunk[] = [
      { type: 'tool-call', id: 'c2', name: 'alpha', arguments: '{"trunc' },
      { type: 'usage', inputTokens: 5, outputTokens: 9 },
      { type: 'finish', reason: 'max-tokens' },
    ]
    const fx = setup(transport, [toolCallResponse('c1', 'alpha', {}, 'first step'), cutOff])
    fx.host.tools.register(alphaTool(() => ran++))
    const { result, events } = await runOnce(fx)
    expect(result.stopReason).toBe('max-tokens')
    expect(result.output).toEqual([
      { type: 'text', text: 'first step' },
      { type: 'tool-call', id: 'c1', name: 'alpha', arguments: '{}' },
    ])
    const messages = eventsOf<{ content: unknown[] }>(events, 'assistant/message')
    expect(messages.at(-1)!.content).toEqual([])
    expect(ran).toBe(1)
    expect(eventsOf<{ callId: string }>(events, 'tool/result').map((r) => r.callId)).toEqual(['c1'])
  })

  it('§3 a max-tokens step with text: output is only that text and the step’s tool call is not executed', async () => {
    let ran = 0
    const chunks: StreamChunk[] = [
      { type: 'text-delta', text: 'cut off here' },
      { type: 'tool-call', id: 'c1', name: 'alpha', arguments: '{}' },
      { type: 'finish', reason: 'max-tokens' },
    ]
    const fx = setup(transport, [chunks])
    fx.host.tools.register(alphaTool(() => ran++))
    const { result, events } = await runOnce(fx)
    expect(result.stopReason).toBe('max-tokens')
    expect(result.output).toEqual([{ type: 'text', text: 'cut off here' }])
    expect(ran).toBe(0)
    expect(eventsOf(events, 'tool/result')).toEqual([])
  })

  it('§3 with no non-empty message, output is all streamed text deltas joined (model failure mid-stream)', async () => {
    const fx = setup(transport)
    fx.host.models.register('flaky', failingModel(['Hel', 'lo, ', 'world'], new Error('connection reset')))
    const { result } = await runOnce(fx, { agentOptions: { provider: 'flaky' } })
    expect(result.stopReason).toBe('error')
    expect(result.output).toEqual([{ type: 'text', text: 'Hello, world' }])
  })

  it('§3 with no non-empty message, output is all streamed text deltas joined (cancelled mid-stream)', async () => {
    const fx = setup(transport, [{ hangAfter: [{ type: 'text-delta', text: 'half ' }, { type: 'text-delta', text: 'done' }] }])
    const controller = new AbortController()
    const run = await fx.host.spawn.start({ prompt: 'go', parent: fx.parent, signal: controller.signal })
    await eventsUntil(run, 'both streamed deltas', (events) => streamedRuns(events).join('') === 'half done')
    controller.abort()
    expect(await run.result).toEqual({ output: [{ type: 'text', text: 'half done' }], stopReason: 'aborted' })
    await run.dispose()
  })

  it('§3 with neither a message nor streamed text, output is []', async () => {
    const fx = setup(transport, [
      () => {
        throw new Error('no stream at all')
      },
    ])
    const { result } = await runOnce(fx)
    expect(result.output).toEqual([])
    expect(result.stopReason).toBe('error')
  })

  it('§3 a refusal with no text gives output [] (its empty message is skipped)', async () => {
    const fx = setup(transport, [refusalResponse()])
    const { result } = await runOnce(fx)
    expect(result.output).toEqual([])
    expect(result.stopReason).toBe('refusal')
  })

  it('§3 selection ignores the stop reason: an earlier message is the output of a refused run', async () => {
    const fx = setup(transport, [toolCallResponse('c1', 'alpha', {}, 'what I found so far'), refusalResponse()])
    fx.host.tools.register(alphaTool())
    const { result } = await runOnce(fx)
    expect(result.stopReason).toBe('refusal')
    expect(result.output).toEqual([
      { type: 'text', text: 'what I found so far' },
      { type: 'tool-call', id: 'c1', name: 'alpha', arguments: '{}' },
    ])
  })

  it('§3 selection ignores the stop reason: an earlier message is the output of a run whose model later failed', async () => {
    const fx = setup(transport, [toolCallResponse('c1', 'alpha', {}, 'kept text')])
    fx.host.tools.register(alphaTool())
    const { result } = await runOnce(fx) // the second request exhausts the script
    expect(result.stopReason).toBe('error')
    expect(result.output).toEqual([
      { type: 'text', text: 'kept text' },
      { type: 'tool-call', id: 'c1', name: 'alpha', arguments: '{}' },
    ])
  })
})

describe.each(TRANSPORTS)('§3 stop reasons [%s]', (transport) => {
  const cases: Array<[string, ScriptEntry[], { model?: string; provider?: string } | undefined, string]> = [
    ['completed → completed', [textResponse('ok')], undefined, 'completed'],
    ['max-tokens → max-tokens', [maxTokensResponse('cut')], undefined, 'max-tokens'],
    ['blocked by a beforeStep rejection → refusal', [textResponse('never')], { model: 'reject-step' }, 'refusal'],
    ['blocked by a model refusal → refusal', [refusalResponse('I will not')], undefined, 'refusal'],
    [
      'error (model stream failed) → error',
      [
        () => {
          throw new Error('boom')
        },
      ],
      undefined,
      'error',
    ],
    ['error (no model under the provider name) → error', [textResponse('never')], { provider: 'missing-model' }, 'error'],
  ]
  it.each(cases)('§3 turn end %s', async (_label, script, agentOptions, stopReason) => {
    const fx = setup(transport, script)
    const { result } = await runOnce(fx, agentOptions ? { agentOptions } : {})
    expect(result.stopReason).toBe(stopReason)
  })

  it('§3 turn end aborted → aborted', async () => {
    const fx = setup(transport, ['hang'])
    const controller = new AbortController()
    const run = await fx.host.spawn.start({ prompt: 'go', parent: fx.parent, signal: controller.signal })
    await fx.model.requested(1)
    controller.abort()
    expect((await run.result).stopReason).toBe('aborted')
    await run.dispose()
  })

  it('§3 a cancelled run that did not complete reports aborted, even when the cancel lands in a tool call', async () => {
    const fx = setup(transport, [toolCallResponse('c1', 'stubborn', {})])
    const started = gate()
    fx.host.tools.register(
      defineTool({
        name: 'stubborn',
        description: 'ignores cancellation, then fails once it was cancelled',
        parameters: { type: 'object', properties: {} },
        execute: async (_args, exec) => {
          started.open()
          await new Promise((resolve) => exec.signal.addEventListener('abort', resolve, { once: true }))
          throw new Error('late failure')
        },
      }),
    )
    const run = await fx.host.spawn.start({ prompt: 'go', parent: fx.parent, signal: signal() })
    await started.promise
    await run.dispose()
    expect((await run.result).stopReason).toBe('aborted')
  })

  it('§3 a completed result carries no diagnostic', async () => {
    const fx = setup(transport, [textResponse('fine')])
    const { result } = await runOnce(fx)
    expect(result).not.toHaveProperty('diagnostic')
  })
})

describe.each(TRANSPORTS)('§3 diagnostics [%s]', (transport) => {
  it('§3 a diagnostic never carries tool inputs, tool outputs or environment values', async () => {
    const secretInput = 'sk-tool-input-7d1e2f'
    const envSecret = 'env-secret-93c1a0'
    process.env['SUBAGENT_CONTRACT_SECRET'] = envSecret
    try {
      const fx = setup(transport, [toolCallResponse('c1', 'leaky', { token: secretInput }), toolCallResponse('c2', 'leaky', { token: secretInput }), maxTokensResponse('')])
      fx.host.tools.register(
        defineTool({
          name: 'leaky',
          description: 'echoes its input and an environment value',
          parameters: { type: 'object', properties: { token: { type: 'string' } } },
          execute: (args) => {
            if (args['token'] === secretInput && fx.model.requests.length === 1) throw new Error(`bad token ${String(args['token'])}`)
            return `env=${process.env['SUBAGENT_CONTRACT_SECRET']} token=${String(args['token'])}`
          },
        }),
      )
      const { result } = await runOnce(fx)
      expect(result.stopReason).toBe('max-tokens')
      expect(result.diagnostic ?? '').not.toContain(secretInput)
      expect(result.diagnostic ?? '').not.toContain(envSecret)

      const fx2 = setup(transport, [toolCallResponse('c1', 'leaky2', { token: secretInput })])
      fx2.host.tools.register(
        defineTool({
          name: 'leaky2',
          description: 'throws with its input in the message',
          parameters: { type: 'object', properties: { token: { type: 'string' } } },
          execute: (args) => {
            throw new Error(`rejected ${String(args['token'])} with ${process.env['SUBAGENT_CONTRACT_SECRET']}`)
          },
        }),
      )
      const second = await runOnce(fx2) // the next model request exhausts the script: error
      expect(second.result.stopReason).toBe('error')
      expect(second.result.diagnostic ?? '').not.toContain(secretInput)
      expect(second.result.diagnostic ?? '').not.toContain(envSecret)
    } finally {
      delete process.env['SUBAGENT_CONTRACT_SECRET']
    }
  })

  it('§3 a run diagnostic is at most 4096 UTF-8 bytes and cut on a character boundary', async () => {
    const fx = setup(transport)
    fx.host.models.register('verbose', failingModel([], new Error('😀é'.repeat(3000))))
    const { result } = await runOnce(fx, { agentOptions: { provider: 'verbose' } })
    expect(result.stopReason).toBe('error')
    expect(typeof result.diagnostic).toBe('string')
    const diagnostic = result.diagnostic!
    expect(Buffer.byteLength(diagnostic, 'utf8')).toBeLessThanOrEqual(4096)
    expect(LONE_SURROGATE.test(diagnostic)).toBe(false)
    expect(diagnostic).not.toContain('\uFFFD')
  })
})

describe('§3 diagnostic truncation (truncateDiagnostic)', () => {
  it('§3 text of at most 4096 UTF-8 bytes is kept unchanged', () => {
    expect(truncateDiagnostic('short')).toBe('short')
    const exact = 'a'.repeat(4096)
    expect(truncateDiagnostic(exact)).toBe(exact)
    const exactMultibyte = '€'.repeat(1365) + 'a' // 4095 + 1 bytes
    expect(truncateDiagnostic(exactMultibyte)).toBe(exactMultibyte)
  })

  it('§3 longer text is cut to at most 4096 bytes and ends with "\\n[diagnostic truncated]"', () => {
    const long = 'a'.repeat(4097)
    const cut = truncateDiagnostic(long)
    expect(cut.endsWith(MARK)).toBe(true)
    expect(Buffer.byteLength(cut, 'utf8')).toBeLessThanOrEqual(4096)
    expect(long.startsWith(cut.slice(0, -MARK.length))).toBe(true)
  })

  it.each([
    ['3-byte characters', '€'.repeat(2000)],
    ['4-byte characters (surrogate pairs)', '😀'.repeat(2000)],
    ['mixed widths', 'a€😀é'.repeat(1000)],
  ])('§3 truncation cuts on a character boundary with %s', (_label, text) => {
    const cut = truncateDiagnostic(text)
    expect(cut.endsWith(MARK)).toBe(true)
    expect(Buffer.byteLength(cut, 'utf8')).toBeLessThanOrEqual(4096)
    const kept = cut.slice(0, -MARK.length)
    expect(text.startsWith(kept)).toBe(true)
    expect(LONE_SURROGATE.test(kept)).toBe(false)
    expect(Buffer.from(kept, 'utf8').toString('utf8')).toBe(kept)
  })
})
