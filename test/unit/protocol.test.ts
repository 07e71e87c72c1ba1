/** Messages crossing the boundary are validated, and a malformed one settles the run instead of crashing or hanging it. */
import { MessageChannel } from 'node:worker_threads'
import { describe, expect, it } from 'vitest'
import { isChildMessage, isCreateRequest, isHostMessage, isSessionEvent } from '../../dist/protocol/validators.js'
import { PROTOCOL_VERSION } from '../../dist/protocol/lifecycle.js'
import { WorkerChild } from '../../dist/parent/worker-child.js'
import hostChild from '../../dist/worker/entry.js'

const header = { id: 'c1', createdAt: new Date(0).toISOString() }
const spec = { id: 'c1', header, options: {}, seed: [], descriptor: { mode: 'one-shot', provider: 'spawn' } }

describe('protocol validators', () => {
  it('accept well-formed messages and reject unknown or malformed ones', () => {
    expect(isHostMessage({ type: 'abort', reason: { kind: 'parent' } })).toBe(true)
    expect(isHostMessage({ type: 'publish', prompt: [{ type: 'text', text: 'hi' }] })).toBe(true)
    expect(isHostMessage({ type: 'launch-missiles' })).toBe(false)
    expect(isHostMessage({ type: 'publish', prompt: 'not blocks' })).toBe(false)
    expect(isChildMessage({ type: 'events', events: [{ seq: 0, type: 'turn/start', data: {} }] })).toBe(true)
    expect(isChildMessage({ type: 'events', events: [{ seq: 0, type: 'turn/start', data: { extra: 1 } }] })).toBe(false)
    expect(isChildMessage({ type: 'idle', structured: { value: { a: 1 } } })).toBe(true)
    expect(isChildMessage({ type: 'rpc/call', id: 0, target: 'model', name: 'm', payload: {} })).toBe(false)
    expect(isSessionEvent({ seq: 1, type: 'tool/result', data: { callId: 'a', name: 't', isError: true, code: 'NOPE', content: [] } })).toBe(false)
    expect(isCreateRequest({ v: PROTOCOL_VERSION, type: 'create', spec, maxParallelToolCalls: 8, hostModels: [], hostTools: [] })).toBe(true)
    expect(isCreateRequest({ v: PROTOCOL_VERSION, type: 'create', spec: { ...spec, header: { id: 1 } }, maxParallelToolCalls: 8, hostModels: [], hostTools: [] })).toBe(false)
  })
})

describe('protocol errors settle the run', () => {
  function child() {
    const { port1, port2 } = new MessageChannel()
    const appended: unknown[] = []
    const view = { id: 'c1', options: {}, session: { header, events: [] } }
    const handle = new WorkerChild(port1, { view, append: (e: unknown) => appended.push(e) }, {
      graceMs: 100,
      placement: { models: new Map(), tools: new Map() },
      terminate: () => false,
      placed: () => {},
      closing: () => false,
    })
    handle.attach(new Promise(() => {}), () => {})
    return { handle, port2, appended }
  }

  it('a malformed message from the worker settles the run error with a protocol diagnostic', async () => {
    const { handle, port2 } = child()
    port2.postMessage({ type: 'created', threadId: 3 })
    await handle.created(new AbortController().signal)
    const outcome = handle.run([{ type: 'text', text: 'go' }])
    port2.postMessage({ type: 'events', events: [{ seq: 0, type: 'made/up', data: {} }] })
    await expect(outcome).resolves.toEqual({ fault: { stopReason: 'error', diagnostic: expect.stringMatching(/^protocol error: .*malformed or unknown message/) } })
    await handle.release()
    port2.close()
  })

  it('a failed creation rejects with the worker’s error, not a hang', async () => {
    const { handle, port2 } = child()
    port2.postMessage({ type: 'create-failed', error: { name: 'TypeError', message: 'toolFilter.deny names an unknown global tool: "x"' } })
    await expect(handle.created(new AbortController().signal)).rejects.toThrow('unknown global tool')
    port2.close()
  })

  it('the worker entry answers a malformed create request with create-failed', async () => {
    const { port1, port2 } = new MessageChannel()
    const messages: unknown[] = []
    port1.on('message', (m) => messages.push(m))
    await hostChild({ request: { v: 99, type: 'create' } as never, port: port2 })
    await new Promise((resolve) => setTimeout(resolve, 10))
    expect(messages).toEqual([{ type: 'create-failed', error: { name: 'ProtocolError', message: expect.stringContaining('invalid create request'), code: 'ERR_SUBAGENT_PROTOCOL' } }])
    port1.close()
  })
})

describe('argument validators', () => {
  it('equal schemas share one compiled validator, so cloned schemas do not pile up', async () => {
    const { argumentValidator } = await import('../../dist/agent/schema.js')
    const schema = () => ({ type: 'object', properties: { a: { type: 'string' } } })
    expect(argumentValidator(schema())).toBe(argumentValidator(schema()))
  })
})
