/**
 * `subagent-worker/otel` with the real OpenTelemetry SDK (CONTRACT.md §12): a delegation tree
 * started inside a caller's span is one trace, on every transport, with each nested child under
 * its parent's `execute_tool subagent` span; and the spans reach a real OTLP/HTTP receiver.
 */
import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { context, SpanKind, SpanStatusCode } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createSubagentTool, defineTool, textOf, textResponse, toolCallResponse, toolCallsResponse } from 'subagent-worker'
import { instrument } from 'subagent-worker/otel'
import { closeHosts, setup, signal, TRANSPORTS, type TransportName } from '../support/harness.js'

const contextManager = new AsyncLocalStorageContextManager()
beforeAll(() => void context.setGlobalContextManager(contextManager.enable()))
afterAll(() => {
  contextManager.disable()
  context.disable()
})

const uninstalls: Array<() => void> = []
afterEach(async () => {
  for (const uninstall of uninstalls.splice(0)) uninstall()
  await closeHosts()
})

function tracing(captureContent?: boolean) {
  const exporter = new InMemorySpanExporter()
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
  uninstalls.push(instrument({ tracerProvider: provider, ...(captureContent === undefined ? {} : { captureContent }) }))
  return { exporter, provider, tracer: provider.getTracer('the-caller') }
}

/** A child (depth 1) that delegates to a grandchild, which delegates to a great-grandchild. */
function threeLevels(transport: TransportName) {
  const fx = setup(transport, [
    toolCallResponse('outer', 'subagent', { description: 'middle', prompt: 'delegate on' }, 'delegating'),
    toolCallResponse('inner', 'subagent', { description: 'leaf', prompt: 'look it up' }),
    toolCallResponse('look', 'lookup', { key: 'k' }),
    textResponse('leaf answer'),
    textResponse('middle answer'),
    textResponse('top answer'),
  ])
  fx.host.tools.register(createSubagentTool(fx.host, { provider: 'spawn', maxDepth: 3 }))
  fx.host.tools.register(defineTool({ name: 'lookup', description: 'Looks up.', parameters: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'] }, execute: ({ key }) => `value of ${key}` }))
  return fx
}

const byName = (spans: readonly ReadableSpan[], name: string) => spans.filter((s) => s.name === name)
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId

describe.each(TRANSPORTS)('%s transport: OpenTelemetry spans', (transport) => {
  it("a three-level tree started in a caller's span is one trace, each child under its parent's execute_tool subagent span", async () => {
    const { exporter, tracer } = tracing()
    const { host, parent } = threeLevels(transport)
    const runId = await tracer.startActiveSpan('caller', async (caller) => {
      try {
        const run = await host.spawn.start({ prompt: 'go', parent, signal: signal(), label: 'top' })
        expect((await run.result).stopReason).toBe('completed')
        await run.dispose()
        return run.id
      } finally {
        caller.end()
      }
    })
    const spans = exporter.getFinishedSpans()
    const [caller] = byName(spans, 'caller')
    expect(new Set(spans.map((s) => s.spanContext().traceId))).toEqual(new Set([caller!.spanContext().traceId]))

    const [top] = byName(spans, 'invoke_agent top')
    const [middle] = byName(spans, 'invoke_agent middle')
    const [leaf] = byName(spans, 'invoke_agent leaf')
    const tools = byName(spans, 'execute_tool subagent')
    const outer = tools.find((s) => s.attributes['gen_ai.tool.call.id'] === 'outer')!
    const inner = tools.find((s) => s.attributes['gen_ai.tool.call.id'] === 'inner')!
    expect(parentOf(top!)).toBe(caller!.spanContext().spanId)
    expect(parentOf(outer)).toBe(top!.spanContext().spanId)
    expect(parentOf(middle!)).toBe(outer.spanContext().spanId)
    expect(parentOf(inner)).toBe(middle!.spanContext().spanId)
    expect(parentOf(leaf!)).toBe(inner.spanContext().spanId)
    const [lookup] = byName(spans, 'execute_tool lookup')
    expect(parentOf(lookup!)).toBe(leaf!.spanContext().spanId)

    // Each child made two model requests, each a chat span under its invoke_agent span.
    const chats = byName(spans, 'chat scripted-1')
    expect(chats).toHaveLength(6)
    for (const agent of [top!, middle!, leaf!]) expect(chats.filter((c) => parentOf(c) === agent.spanContext().spanId)).toHaveLength(2)

    expect(top!.kind).toBe(transport === 'bullmq' ? SpanKind.CLIENT : SpanKind.INTERNAL)
    expect(top!.attributes).toEqual({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.provider.name': 'scripted',
      'gen_ai.request.model': 'scripted-1',
      'gen_ai.conversation.id': runId,
      'gen_ai.agent.id': runId,
      'gen_ai.agent.name': 'top',
      'subagent_worker.depth': 1,
      'subagent_worker.transport': transport,
      'gen_ai.usage.input_tokens': expect.any(Number),
      'gen_ai.usage.output_tokens': expect.any(Number),
      'subagent_worker.stop_reason': 'completed',
    })
    expect(leaf!.attributes).toMatchObject({ 'subagent_worker.depth': 3, 'gen_ai.agent.name': 'leaf' })
    const firstChat = chats.find((c) => parentOf(c) === top!.spanContext().spanId)!
    expect(firstChat.kind).toBe(SpanKind.CLIENT)
    expect(firstChat.attributes).toMatchObject({ 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'scripted-1', 'gen_ai.response.finish_reasons': ['tool_calls'] })
    expect(outer.attributes).toMatchObject({ 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'subagent' })
    // Content is recorded only when asked for.
    expect(spans.some((s) => Object.keys(s.attributes).some((k) => k.startsWith('gen_ai.tool.call.arguments') || k === 'gen_ai.output.messages'))).toBe(false)
    // The real times: a tool call inside its child's life, a nested child inside the call.
    const ms = (t: [number, number]) => t[0] * 1e3 + t[1] / 1e6
    expect(ms(outer.startTime)).toBeGreaterThanOrEqual(ms(top!.startTime))
    expect(ms(middle!.startTime)).toBeGreaterThanOrEqual(ms(outer.startTime))
    expect(ms(outer.endTime)).toBeGreaterThanOrEqual(ms(middle!.endTime))
  })
})

describe.each(TRANSPORTS)('%s transport: a delegation tool of another name', (transport) => {
  it('its execute_tool span keeps the tool\'s own name, and the nested child is under it', async () => {
    const { exporter } = tracing()
    const fx = setup(transport, [toolCallResponse('d1', 'delegate', { description: 'inner', prompt: 'go on' }), textResponse('inner answer'), textResponse('top answer')])
    fx.host.tools.register(createSubagentTool(fx.host, { provider: 'spawn', toolName: 'delegate' }))
    expect((await fx.host.spawn.run({ prompt: 'go', parent: fx.parent, signal: signal(), label: 'top' })).stopReason).toBe('completed')
    const spans = exporter.getFinishedSpans()
    expect(byName(spans, 'execute_tool subagent')).toEqual([])
    const [call] = byName(spans, 'execute_tool delegate')
    expect(call!.attributes).toMatchObject({ 'gen_ai.tool.name': 'delegate', 'gen_ai.tool.call.id': 'd1' })
    expect(parentOf(byName(spans, 'invoke_agent inner')[0]!)).toBe(call!.spanContext().spanId)
  })
})

// CONTRACT.md §12: a child's span is a child of the context active at start(); only a delegating call's child is under that call.
describe.each(TRANSPORTS)('%s transport: a child of a child started directly with start()', (transport) => {
  it("is under the span active at its start(), not its parent agent's invoke_agent span", async () => {
    const { exporter, tracer } = tracing()
    const { host, parent, model } = setup(transport, ['hang', textResponse('inner answer')])
    const top = await host.spawn.start({ prompt: 'wait', parent, signal: signal(), label: 'top' })
    // The top child holds the first answer, so the inner one gets the second.
    await model.requested(1)
    await tracer.startActiveSpan('X', async (x) => {
      try {
        const inner = await host.spawn.run({ prompt: 'answer', parent: host.agents.get(top.id)!, signal: signal(), label: 'inner' })
        expect(inner.stopReason).toBe('completed')
      } finally {
        x.end()
      }
    })
    await top.dispose()
    const spans = exporter.getFinishedSpans()
    const [x] = byName(spans, 'X')
    expect(parentOf(byName(spans, 'invoke_agent inner')[0]!)).toBe(x!.spanContext().spanId)
    expect(byName(spans, 'invoke_agent inner')[0]!.attributes).toMatchObject({ 'subagent_worker.depth': 2 })
  })
})

// A host tool may start a child itself: that child belongs to the call, as a subagent call's does.
describe.each(TRANSPORTS)('%s transport: a child a host tool starts itself', (transport) => {
  it("is under that call's execute_tool span, whatever context the host serves the call in", async () => {
    const { exporter, tracer } = tracing()
    const fx = setup(transport, [toolCallResponse('s1', 'spawner', {}), textResponse('inner answer'), textResponse('top answer')])
    const { host } = fx
    host.tools.register(
      defineTool({
        name: 'spawner',
        description: 'Starts a child itself.',
        parameters: { type: 'object' },
        execute: async (_args, exec) => textOf((await host.spawn.run({ prompt: 'answer', parent: exec.agent, signal: exec.signal, label: 'inner' })).output),
      }),
    )
    // Started inside an unrelated span: a runner opened for it serves its calls in that context.
    await tracer.startActiveSpan('unrelated', async (span) => {
      try {
        expect((await host.spawn.run({ prompt: 'go', parent: fx.parent, signal: signal(), label: 'top' })).stopReason).toBe('completed')
      } finally {
        span.end()
      }
    })
    const spans = exporter.getFinishedSpans()
    const [call] = byName(spans, 'execute_tool spawner')
    const [inner] = byName(spans, 'invoke_agent inner')
    expect(parentOf(inner!)).toBe(call!.spanContext().spanId)
    expect(inner!.spanContext().traceId).toBe(call!.spanContext().traceId)
  })
})

// CONTRACT.md §2a: two calls of one step sharing an id are two runs, so two spans, each ended.
describe.each(TRANSPORTS)('%s transport: two delegating calls of one step sharing an id', (transport) => {
  it('are two execute_tool spans, both ended, each holding one of the two nested children', async () => {
    const { exporter } = tracing()
    const fx = setup(transport, [
      toolCallsResponse([{ id: 'd', name: 'subagent', args: { description: 'a', prompt: 'one' } }, { id: 'd', name: 'subagent', args: { description: 'b', prompt: 'two' } }]),
      textResponse('an answer'),
      textResponse('an answer'),
      textResponse('top answer'),
    ])
    fx.host.tools.register(createSubagentTool(fx.host, { provider: 'spawn', maxDepth: 2 }))
    expect((await fx.host.spawn.run({ prompt: 'go', parent: fx.parent, signal: signal(), label: 'top' })).stopReason).toBe('completed')
    const spans = exporter.getFinishedSpans()
    const [top] = byName(spans, 'invoke_agent top')
    const calls = byName(spans, 'execute_tool subagent')
    expect(calls.map((c) => [c.attributes['gen_ai.tool.call.id'], parentOf(c)])).toEqual([
      ['d', top!.spanContext().spanId],
      ['d', top!.spanContext().spanId],
    ])
    const children = [...byName(spans, 'invoke_agent a'), ...byName(spans, 'invoke_agent b')]
    expect(new Set(children.map(parentOf))).toEqual(new Set(calls.map((c) => c.spanContext().spanId)))
  })
})

describe('instrument options', () => {
  it('captureContent: true records tool arguments and results, and the messages of each step', async () => {
    const { exporter } = tracing(true)
    const { host, parent } = setup('inline', [toolCallResponse('c1', 'lookup', { key: 'k' }, 'looking'), textResponse('found')])
    host.tools.register(defineTool({ name: 'lookup', description: 'Looks up.', parameters: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'] }, execute: ({ key }) => `value of ${key}` }))
    expect((await host.spawn.run({ prompt: 'go', parent, signal: signal() })).stopReason).toBe('completed')
    const spans = exporter.getFinishedSpans()
    expect(byName(spans, 'execute_tool lookup')[0]!.attributes).toMatchObject({ 'gen_ai.tool.call.arguments': '{"key":"k"}', 'gen_ai.tool.call.result': 'value of k' })
    const chat = byName(spans, 'chat scripted-1').find((s) => s.attributes['gen_ai.response.finish_reasons']?.toString() === 'stop')!
    expect(JSON.parse(chat.attributes['gen_ai.output.messages'] as string)).toEqual([{ role: 'assistant', parts: [{ type: 'text', content: 'found' }] }])
  })

  it('two calls of one step sharing an id are two execute_tool spans, each with its own arguments and result', async () => {
    const { exporter } = tracing(true)
    const { host, parent } = setup('inline', [toolCallsResponse([{ id: 'd', name: 'count', args: { n: 1 } }, { id: 'd', name: 'count', args: { n: 2 } }]), textResponse('done')])
    host.tools.register(defineTool({ name: 'count', description: 'Counts.', parameters: { type: 'object', properties: { n: { type: 'number' } } }, execute: ({ n }: { n: number }) => `run ${n}` }))
    expect((await host.spawn.run({ prompt: 'go', parent, signal: signal() })).stopReason).toBe('completed')
    // Results come in the calls' order, and each ends the oldest open call of its id.
    expect(byName(exporter.getFinishedSpans(), 'execute_tool count').map((s) => [s.attributes['gen_ai.tool.call.arguments'], s.attributes['gen_ai.tool.call.result']])).toEqual([
      ['{"n":1}', 'run 1'],
      ['{"n":2}', 'run 2'],
    ])
  })

  it('a step cut off by its token cap finishes "length", a refused one "content_filter", as the GenAI conventions name them', async () => {
    const { exporter } = tracing()
    const { host, parent } = setup('inline', [
      [{ type: 'text-delta', text: 'cut' }, { type: 'finish', reason: 'max-tokens' }],
      [{ type: 'text-delta', text: 'no' }, { type: 'finish', reason: 'refusal' }],
    ])
    await host.spawn.run({ prompt: 'go on and on', parent, signal: signal() })
    await host.spawn.run({ prompt: 'do something refused', parent, signal: signal() })
    expect(byName(exporter.getFinishedSpans(), 'chat scripted-1').map((s) => s.attributes['gen_ai.response.finish_reasons'])).toEqual([['length'], ['content_filter']])
  })

  it('a child that fails has error.type and an error status', async () => {
    const { exporter } = tracing()
    const { host, parent } = setup('inline', [])
    const result = await host.spawn.run({ prompt: 'go', parent, signal: signal(), agentOptions: { provider: 'nowhere' } })
    expect(result.stopReason).toBe('error')
    const [agent] = exporter.getFinishedSpans().filter((s) => s.name.startsWith('invoke_agent'))
    expect(agent!.attributes).toMatchObject({ 'error.type': 'error', 'subagent_worker.stop_reason': 'error' })
    expect(agent!.status).toMatchObject({ code: SpanStatusCode.ERROR, message: result.diagnostic })
  })

  it('uninstalling stops all of it', async () => {
    const { exporter } = tracing()
    const { host, parent } = setup('inline', [textResponse('one'), textResponse('two')])
    await host.spawn.run({ prompt: 'go', parent, signal: signal() })
    const before = exporter.getFinishedSpans().length
    expect(before).toBeGreaterThan(0)
    for (const uninstall of uninstalls.splice(0)) uninstall()
    await host.spawn.run({ prompt: 'again', parent, signal: signal() })
    expect(exporter.getFinishedSpans()).toHaveLength(before)
  })
})

describe('export through the real OTLP/HTTP exporter', () => {
  it('a receiver on 127.0.0.1 gets the tree, one trace', async () => {
    const bodies: unknown[] = []
    const server = createServer((req, res) => {
      void readBody(req).then((body) => {
        bodies.push({ path: req.url, type: req.headers['content-type'], body: JSON.parse(body) })
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const { port } = server.address() as AddressInfo
      const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url: `http://127.0.0.1:${port}/v1/traces` }))] })
      uninstalls.push(instrument({ tracerProvider: provider }))
      const { host, parent } = threeLevels('inline')
      await provider.getTracer('the-caller').startActiveSpan('caller', async (caller) => {
        await host.spawn.run({ prompt: 'go', parent, signal: signal(), label: 'top' })
        caller.end()
      })
      await provider.forceFlush()
      const spans = bodies.flatMap((b) => (b as OtlpBody).body.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans)))
      expect(bodies.every((b) => (b as OtlpBody).path === '/v1/traces' && (b as OtlpBody).type === 'application/json')).toBe(true)
      expect(spans.map((s) => s.name).sort()).toEqual(
        ['caller', 'invoke_agent top', 'invoke_agent middle', 'invoke_agent leaf', 'execute_tool subagent', 'execute_tool subagent', 'execute_tool lookup', ...Array<string>(6).fill('chat scripted-1')].sort(),
      )
      expect(new Set(spans.map((s) => s.traceId)).size).toBe(1)
      const bySpanId = new Map(spans.map((s) => [s.spanId, s]))
      const leaf = spans.find((s) => s.name === 'invoke_agent leaf')!
      const chain: string[] = []
      for (let s: OtlpSpan | undefined = leaf; s; s = s.parentSpanId ? bySpanId.get(s.parentSpanId) : undefined) chain.push(s.name)
      expect(chain).toEqual(['invoke_agent leaf', 'execute_tool subagent', 'invoke_agent middle', 'execute_tool subagent', 'invoke_agent top', 'caller'])
      expect(leaf.attributes).toContainEqual({ key: 'subagent_worker.depth', value: { intValue: 3 } })
      await provider.shutdown()
    } finally {
      await new Promise((resolve) => server.close(resolve))
    }
  })
})

interface OtlpSpan {
  name: string
  traceId: string
  spanId: string
  parentSpanId?: string
  attributes: Array<{ key: string; value: Record<string, unknown> }>
}
interface OtlpBody {
  path: string
  type: string
  body: { resourceSpans: Array<{ scopeSpans: Array<{ spans: OtlpSpan[] }> }> }
}

async function readBody(req: IncomingMessage): Promise<string> {
  let body = ''
  for await (const chunk of req) body += String(chunk)
  return body
}

