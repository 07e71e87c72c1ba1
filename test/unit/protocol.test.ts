/** The frame protocol's shapes: validators accept what the two ends send and refuse anything else. */
import { describe, expect, expectTypeOf, it } from 'vitest'
import type { ContentBlock } from '../../dist/protocol/shapes/content.js'
import { PROTOCOL_VERSION, type HostMessage, type RunnerMessage } from '../../dist/protocol/messages.js'
import type { ModelCall, RpcMethod, RpcPayload, RpcResult, ToolCall, ToolReply } from '../../dist/protocol/rpc.js'
import type { KnownSessionEvent } from '../../dist/protocol/shapes/session.js'
import type { StreamChunk } from '../../dist/protocol/shapes/stream.js'
import type { Validator } from '../../dist/protocol/validate.js'
import * as validators from '../../dist/protocol/validators.js'
import { MAX_VALUE_DEPTH, tryClone, withinDepth } from '../../dist/protocol/values.js'
import { RUNNER_BOUNDS } from '../../dist/protocol/bounds.js'

const header = { id: 'c1', createdAt: new Date(0).toISOString() }
const spec = { id: 'c1', header, options: {}, seed: [], descriptor: { mode: 'one-shot', provider: 'spawn' } }

const { isHostFrame, isKnownSessionEvent, isRunnerFrame } = validators

type Checked<V> = V extends Validator<infer T> ? T : never

describe('types from schemas', () => {
  // Checked by the test build (`tsc -p test`): each validator is typed by its schema, as its shape's type is.
  it('a validator narrows to its shape\'s type', () => {
    expectTypeOf<Checked<typeof validators.isContentBlock>>().toEqualTypeOf<ContentBlock>()
    expectTypeOf<Checked<typeof validators.isStreamChunk>>().toEqualTypeOf<StreamChunk>()
    expectTypeOf<Checked<typeof validators.isKnownSessionEvent>>().toEqualTypeOf<KnownSessionEvent>()
    expectTypeOf<Checked<typeof validators.isHostMessage>>().toEqualTypeOf<HostMessage>()
    expectTypeOf<Checked<typeof validators.isHostFrame>>().toEqualTypeOf<HostMessage[]>()
    expectTypeOf<Checked<typeof validators.isRunnerMessage>>().toEqualTypeOf<RunnerMessage>()
    expectTypeOf<Checked<typeof validators.isRunnerFrame>>().toEqualTypeOf<RunnerMessage[]>()
    // Only seq and type: a foreign parent's event is not checked further.
    expectTypeOf<Checked<typeof validators.isSessionEvent>>().toEqualTypeOf<{ [x: string]: unknown; seq: number; type: string }>()
  })

  it('the RPC types come from its one method map', () => {
    expectTypeOf<RpcMethod>().toEqualTypeOf<'model' | 'tool' | 'step'>()
    expectTypeOf<Extract<RunnerMessage, { type: 'rpc/call' }>['method']>().toEqualTypeOf<RpcMethod>()
    expectTypeOf<RpcPayload<'model'>>().toEqualTypeOf<ModelCall>()
    expectTypeOf<RpcPayload<'tool'>>().toEqualTypeOf<ToolCall>()
    expectTypeOf<RpcResult<'model'>>().toEqualTypeOf<null | { limit: { kind: 'limit'; limit: 'timeoutMs' | 'maxSteps' | 'maxTotalTokens'; value: number } }>()
    expectTypeOf<RpcResult<'tool'>>().toEqualTypeOf<ToolReply>()
    expectTypeOf<RpcPayload<'step'>>().toEqualTypeOf<{}>()
    expectTypeOf<RpcResult<'step'>>().toEqualTypeOf<RpcResult<'model'>>()
  })
})

describe('frame validators', () => {
  it('accept well-formed frames in both directions', () => {
    expect(isHostFrame([{ type: 'welcome', v: PROTOCOL_VERSION, config: { maxParallelToolCalls: 8 } }, { type: 'create', child: 'c1', spec, hostModels: [], hostTools: [] }])).toBe(true)
    expect(isHostFrame([{ type: 'abort', child: 'c1', reason: { kind: 'parent' } }, { type: 'publish', child: 'c1', prompt: [{ type: 'text', text: 'hi' }] }])).toBe(true)
    expect(isRunnerFrame([{ type: 'hello', v: PROTOCOL_VERSION }, { type: 'ready' }, { type: 'events', child: 'c1', events: [{ seq: 0, type: 'turn/start', data: {} }] }])).toBe(true)
    expect(isRunnerFrame([{ type: 'idle', child: 'c1', structured: { value: { a: 1 } } }, { type: 'rpc/call', child: 'c1', call: 1, method: 'tool', payload: {} }])).toBe(true)
  })

  it('refuse unknown messages, missing addressees, bad events and empty frames', () => {
    expect(isHostFrame([{ type: 'launch-missiles' }])).toBe(false)
    expect(isHostFrame([{ type: 'publish', child: 'c1', prompt: 'not blocks' }])).toBe(false)
    expect(isHostFrame([])).toBe(false)
    expect(isRunnerFrame({ type: 'events' })).toBe(false)
    expect(isRunnerFrame([{ type: 'created' }])).toBe(false)
    expect(isRunnerFrame([{ type: 'events', child: 'c1', events: [{ seq: 0, type: 'turn/start', data: { extra: 1 } }] }])).toBe(false)
    expect(isRunnerFrame([{ type: 'rpc/call', child: 'c1', call: 0, method: 'tool', payload: {} }])).toBe(false)
    // A streamed text chunk crosses as its bare text; nothing else stands in for an event.
    expect(isRunnerFrame([{ type: 'events', child: 'c1', events: ['Hel', 'lo', { seq: 4, type: 'turn/start', data: {} }] }])).toBe(true)
    expect(isRunnerFrame([{ type: 'idle', child: 'c1', events: ['.'] }])).toBe(true)
    for (const item of [7, null, true, ['text'], { text: 'Hel' }]) expect(isRunnerFrame([{ type: 'events', child: 'c1', events: [item] }])).toBe(false)
    // A frame's text chunks of every child, side by side: strings only, at least one pair (the host checks they pair up).
    expect(isRunnerFrame([{ type: 'texts', texts: ['c1', 'Hel', 'c2', 'lo'] }])).toBe(true)
    for (const texts of [[], ['c1', 7], ['c1', null], ['c1', { text: 'Hel' }], 'c1 Hel']) expect(isRunnerFrame([{ type: 'texts', texts }])).toBe(false)
    expect(isRunnerFrame([{ type: 'texts', texts: ['c1', 'Hel'], child: 'c1' }])).toBe(false)
    // So does a model call's text delta, host to runner.
    expect(isHostFrame([{ type: 'rpc/chunks', child: 'c1', call: 1, chunks: ['Hel', { type: 'usage', inputTokens: 1, outputTokens: 2 }] }])).toBe(true)
    for (const item of [7, null, { text: 'Hel' }]) expect(isHostFrame([{ type: 'rpc/result', child: 'c1', call: 1, chunks: [item] }])).toBe(false)
    expect(isRunnerFrame([{ type: 'rpc/call', child: 'c1', call: 1, method: 'shell', payload: {} }])).toBe(false)
    // A call may carry the events queued before it, checked as an events message's; a cancel carries none.
    expect(isRunnerFrame([{ type: 'rpc/call', child: 'c1', call: 1, method: 'model', payload: {}, events: ['Hel', { seq: 4, type: 'subagent/descriptor', data: { mode: 'one-shot', provider: 'm' } }] }])).toBe(true)
    for (const events of [[], [7], [{ seq: 0, type: 'turn/start', data: { extra: 1 } }], 'Hel']) {
      expect(isRunnerFrame([{ type: 'rpc/call', child: 'c1', call: 1, method: 'model', payload: {}, events }])).toBe(false)
    }
    expect(isRunnerFrame([{ type: 'rpc/cancel', child: 'c1', call: 1, events: ['Hel'] }])).toBe(false)
    // A runner's (or a node's) hooks: each known hook at most once.
    expect(isRunnerFrame([{ type: 'ready', hooks: ['beforeStep', 'afterTool'] }])).toBe(true)
    expect(isRunnerFrame([{ type: 'ready', hooks: ['afterTool', 'afterTool'] }])).toBe(false)
    expect(isRunnerFrame([{ type: 'ready', hooks: ['onCrash'] }])).toBe(false)
    // Its module's tool table: closed schemas, at most RUNNER_BOUNDS.moduleTools of them.
    const schema = { name: 't', description: 'd', parameters: { type: 'object' } }
    expect(isRunnerFrame([{ type: 'ready', hooks: [], tools: [schema] }])).toBe(true)
    expect(isRunnerFrame([{ type: 'ready', tools: [{ ...schema, execute: 'x' }] }])).toBe(false)
    expect(isRunnerFrame([{ type: 'ready', tools: Array.from({ length: RUNNER_BOUNDS.moduleTools + 1 }, () => schema) }])).toBe(false)
    expect(isKnownSessionEvent({ seq: 1, type: 'tool/result', data: { callId: 'a', name: 't', isError: true, code: 'NOPE', content: [] } })).toBe(false)
  })
})

describe('values that cross', () => {
  const nested = (depth: number) => {
    let value: unknown = 'leaf'
    for (let i = 0; i < depth; i++) value = [value]
    return value
  }

  it(`are bounded at ${MAX_VALUE_DEPTH} levels of nesting, below what a receiving thread can decode`, () => {
    expect(withinDepth(nested(MAX_VALUE_DEPTH))).toBe(true)
    expect(withinDepth(nested(MAX_VALUE_DEPTH + 1))).toBe(false)
    expect(withinDepth({ a: { b: new Map([['k', nested(MAX_VALUE_DEPTH)]]) } })).toBe(false)
    expect(tryClone(nested(MAX_VALUE_DEPTH + 1))).toBeUndefined()
    expect(tryClone({ fn: () => 1 })).toBeUndefined()
    expect(tryClone({ a: [1, 2] })).toEqual({ value: { a: [1, 2] } })
  })
})

describe('argument validators', () => {
  it('equal schemas share one compiled validator, so cloned schemas do not pile up', async () => {
    const { argumentValidator } = await import('../../dist/agent/tools/schema.js')
    const schema = () => ({ type: 'object', properties: { a: { type: 'string' } } })
    expect(argumentValidator(schema())).toBe(argumentValidator(schema()))
  })
})
