/** The typed RPC in src/protocol: per-child ids, streamed chunks, payloads checked by the server, abort crossing as a reason, no hung call on close. */
import { describe, expect, it } from 'vitest'
import { flatEvents } from '../../dist/protocol/messages.js'
import { HELD_BYTES, HELD_CHUNKS, RpcClient, RpcServer, type RpcHandlers, type RpcReply } from '../../dist/protocol/rpc.js'
import type { RunnerMessage } from '../../dist/protocol/messages.js'

type CallMessage = Extract<RunnerMessage, { type: 'rpc/call' | 'rpc/cancel' }>

const noTool: RpcHandlers['tool'] = async () => ({ text: 'unused', concluded: false })
const noModel: RpcHandlers['model'] = async () => null
const noStep: RpcHandlers['step'] = async () => null

/**
 * Waits until `condition` holds, looking once a turn: the messages between client and server cross
 * at the end of a turn (setImmediate), so each turn is when it may have changed. No timer: a lost
 * message ends in the test's timeout, and `what` says what never came.
 */
async function until(condition: () => boolean, what: string, turns = 100_000): Promise<void> {
  for (let turn = 0; !condition(); turn++) {
    if (turn > turns) throw new Error(`${what} never came`)
    await new Promise((resolve) => setImmediate(resolve))
  }
}

/**
 * A client and a server wired back to back through structuredClone, as a channel would. Each
 * side's sink has an epoch that advances when its queued messages are delivered (one "frame").
 */
function pair(handlers: Partial<RpcHandlers>) {
  let server!: RpcServer
  let client!: RpcClient
  const frames: RpcReply[][] = []
  const link = <M>(deliver: (message: M) => void, record?: (frame: M[]) => void) => {
    let queue: M[] = []
    const sink = {
      epoch: 0,
      push(message: M) {
        if (queue.push(message) > 1) return
        setImmediate(() => {
          const frame = structuredClone(queue)
          queue = []
          sink.epoch++
          record?.(frame)
          for (const m of frame) deliver(m)
        })
      },
    }
    return sink
  }
  client = new RpcClient('c1', link<CallMessage>((m) => server.receive(m)))
  server = new RpcServer('c1', link<RpcReply>((m) => client.receive(m), (frame) => frames.push(frame)), { model: noModel, tool: noTool, step: noStep, ...handlers })
  return { client, server, frames }
}

describe('rpc', () => {
  it("holds a call's chunks, each text delta as it was emitted (each is an event the host records), and sends them with its result in one message, across turns", async () => {
    const sent: boolean[] = []
    const turn = () => new Promise((resolve) => setImmediate(resolve))
    const { client, frames } = pair({
      async model(_payload, { emit }) {
        sent.push(emit({ type: 'text-delta', text: 'a' }))
        await turn()
        sent.push(emit({ type: 'text-delta', text: 'b' }))
        await turn()
        sent.push(emit({ type: 'usage', inputTokens: 1, outputTokens: 2 }))
        await turn()
        sent.push(emit({ type: 'text-delta', text: 'c' }))
        return null
      },
    })
    const chunks: unknown[] = []
    const value = await client.call('model', { provider: 'p' }, { onChunk: (chunk) => chunks.push(chunk) })
    expect(sent).toEqual([true, true, true, true])
    expect(chunks).toEqual([
      { type: 'text-delta', text: 'a' },
      { type: 'text-delta', text: 'b' },
      { type: 'usage', inputTokens: 1, outputTokens: 2 },
      { type: 'text-delta', text: 'c' },
    ])
    expect(value).toBeNull()
    // The chunks and the result crossed together, as one message, though the frames of three turns went by.
    expect(frames).toHaveLength(1)
    expect(frames[0]!.map((m) => m.type)).toEqual(['rpc/result'])
    // Text deltas cross as their bare text, any other chunk whole.
    expect(frames[0]![0]).toMatchObject({ chunks: ['a', 'b', { type: 'usage', inputTokens: 1, outputTokens: 2 }, 'c'] })
  })

  it('rejects with the remote error, keeping its name and code', async () => {
    const { client } = pair({
      async tool() {
        throw Object.assign(new RangeError('too far'), { code: 'E_FAR' })
      },
    })
    await expect(client.call('tool', { name: 't', callId: 'x', args: {} })).rejects.toMatchObject({ name: 'RangeError', message: 'too far', code: 'E_FAR' })
  })

  it('the server refuses a payload that does not match its method, without running the handler', async () => {
    let ran = false
    const { client } = pair({
      async tool() {
        ran = true
        return { text: 'ran', concluded: false }
      },
    })
    const bad = { name: 5, callId: 'x', args: {} } as unknown as { name: string; callId: string; args: Record<string, unknown> }
    await expect(client.call('tool', bad)).rejects.toMatchObject({ name: 'ProtocolError', code: 'ERR_SUBAGENT_PROTOCOL', message: expect.stringContaining('invalid payload for rpc method "tool"') })
    expect(ran).toBe(false)
  })

  it('a second call under a running call id is refused, the first carries on', async () => {
    let release = () => {}
    const handler = new RpcServer('c1', { epoch: 0, push: (m) => replies.push(m) }, { model: noModel, tool: () => new Promise((resolve) => (release = () => resolve({ text: 'first', concluded: false }))), step: noStep })
    const replies: RpcReply[] = []
    const call = { type: 'rpc/call', child: 'c1', call: 1, method: 'tool', payload: { name: 't', callId: 'x', args: {} } } as const
    handler.receive(call)
    handler.receive(call)
    expect(replies).toEqual([{ type: 'rpc/error', child: 'c1', call: 1, error: expect.objectContaining({ message: 'rpc call 1 is already running' }) }])
    release()
    await until(() => replies.length === 2, "the first call's result")
    expect(replies[1]).toEqual({ type: 'rpc/result', child: 'c1', call: 1, value: { text: 'first', concluded: false } })
  })

  it('a result that does not match the method is rejected by the caller', async () => {
    const { client } = pair({ tool: async () => ({ text: 42 }) as never })
    await expect(client.call('tool', { name: 't', callId: 'x', args: {} })).rejects.toThrow(/malformed result for a "tool" call/)
  })

  it('an abort rejects locally at once and reaches the far side as an aborted signal with the reason', async () => {
    let remote: AbortSignal | undefined
    const { client } = pair({
      tool: (_payload, { signal }) =>
        new Promise((resolve) => {
          remote = signal
          signal.addEventListener('abort', () => resolve({ text: 'late', concluded: false }), { once: true })
        }),
    })
    const controller = new AbortController()
    const call = client.call('tool', { name: 't', callId: 'x', args: {} }, { signal: controller.signal })
    await until(() => remote !== undefined, 'the call to reach the far side')
    controller.abort({ kind: 'parent' })
    await expect(call).rejects.toEqual({ kind: 'parent' })
    await until(() => remote!.aborted, 'the cancel to reach the far side')
    expect(remote?.aborted).toBe(true)
    expect(remote?.reason).toEqual({ kind: 'parent' })
  })

  it('a call the caller cancelled streams and answers nothing more, and no longer counts as running', async () => {
    let emit: ((chunk: { type: 'text-delta'; text: string }) => boolean) | undefined
    let finish: (() => void) | undefined
    const { client, server, frames } = pair({
      model: (_payload, context) =>
        new Promise((resolve) => {
          emit = context.emit
          finish = () => resolve(null)
        }),
    })
    const controller = new AbortController()
    const call = client.call('model', { provider: 'p' }, { signal: controller.signal })
    await until(() => emit !== undefined, 'the call to reach the far side')
    expect(emit!({ type: 'text-delta', text: 'before' })).toBe(true)
    expect(server.running).toBe(1)
    controller.abort({ kind: 'parent' })
    await expect(call).rejects.toEqual({ kind: 'parent' })
    await until(() => server.running === 0, 'the cancel to reach the far side')
    expect(emit!({ type: 'text-delta', text: 'after' })).toBe(false)
    finish!()
    // A later call's result crosses after anything the cancelled call could still have sent.
    await client.call('tool', { name: 't', callId: 'x', args: {} })
    // The delta before the cancel crossed; nothing after it did, the result included.
    expect(frames.flat()).toEqual([
      { type: 'rpc/chunks', child: 'c1', call: 1, chunks: ['before'] },
      { type: 'rpc/result', child: 'c1', call: 2, value: { text: 'unused', concluded: false } },
    ])
  })

  it('closing rejects every pending call and every later one: nothing hangs', async () => {
    const { client } = pair({ model: () => new Promise(() => {}), tool: () => new Promise(() => {}) })
    const pending = [client.call('model', { provider: 'p' }), client.call('tool', { name: 't', callId: 'x', args: {} })]
    client.close('channel closed')
    for (const call of pending) await expect(call).rejects.toThrow('channel closed')
    await expect(client.call('tool', { name: 't', callId: 'y', args: {} })).rejects.toThrow('channel closed')
  })

  it('a server close aborts every running handler', async () => {
    const signals: AbortSignal[] = []
    const { client, server } = pair({
      tool: (_payload, { signal }) => {
        signals.push(signal)
        return new Promise(() => {})
      },
    })
    void client.call('tool', { name: 'a', callId: '1', args: {} }).catch(() => {})
    void client.call('tool', { name: 'b', callId: '2', args: {} }).catch(() => {})
    await until(() => signals.length === 2, 'both calls to run')
    server.close({ kind: 'runner-gone' })
    expect(signals.map((s) => s.aborted)).toEqual([true, true])
  })

  it('a muted method streams nothing more and says so; what it held goes at the mute; its running calls stop with the reason; a later call of it is not served (its caller cancels it); other methods still cross', async () => {
    let open!: () => void
    const go = { promise: new Promise<void>((resolve) => (open = resolve)), resolve: () => open() }
    const emitted: boolean[] = []
    const stoppedWith: unknown[] = []
    const { client, server, frames } = pair({
      async model(_payload, { emit, signal }) {
        emitted.push(emit({ type: 'text-delta', text: 'before' }))
        await go.promise
        stoppedWith.push(signal.reason)
        emitted.push(emit({ type: 'text-delta', text: 'after' }))
        return null
      },
      async tool() {
        return { text: 'still served', concluded: false }
      },
    })
    const running: unknown[] = []
    // The caller's side of a muted call: the child's loop, which the abort that follows a mute cancels.
    const caller = new AbortController()
    const first = client.call('model', { provider: 'p' }, { signal: caller.signal, onChunk: (chunk) => running.push(chunk) })
    await until(() => emitted.length === 1, 'the first delta')
    // Held: a frame goes by, and nothing of it crosses.
    await new Promise((resolve) => setImmediate(resolve))
    expect(frames).toEqual([])
    const reason = new DOMException('the caller gave up', 'TimeoutError')
    server.mute('model', reason)
    await until(() => running.length === 1, 'the held delta, sent at the mute')
    go.resolve()
    await until(() => stoppedWith.length === 1, 'the running call to see its stop')
    expect(stoppedWith[0]).toBe(reason)
    caller.abort('the loop stopped')
    await expect(first).rejects.toBe('the loop stopped')
    // Made before its caller heard the abort: it never reaches the model.
    const caller2 = new AbortController()
    const later = client.call('model', { provider: 'p' }, { signal: caller2.signal })
    // Answered after the later call was received (one channel, in order).
    await expect(client.call('tool', { name: 't', callId: 'x', args: {} })).resolves.toMatchObject({ text: 'still served' })
    expect(emitted).toEqual([true, false])
    caller2.abort('the loop stopped')
    await expect(later).rejects.toBe('the loop stopped')
    expect(running).toEqual([{ type: 'text-delta', text: 'before' }])
    expect(frames.flat().filter((m) => m.type === 'rpc/chunks' || m.type === 'rpc/result').flatMap((m) => m.chunks ?? [])).toEqual(['before'])
  })

  it("what a call holds goes ahead of anything else the server sends: another call's reply, another call's chunks, an error", async () => {
    const replies: RpcReply[] = []
    const emits: Array<(chunk: { type: 'text-delta'; text: string }) => boolean> = []
    const ends: Array<() => void> = []
    const server = new RpcServer('c1', { epoch: 0, push: (m) => replies.push(m) }, {
      model: (_payload, { emit }) => new Promise((resolve) => (emits.push(emit), ends.push(() => resolve(null)))),
      tool: async () => ({ text: 'tool', concluded: false }),
      step: noStep,
    })
    const call = (call: number, method: 'model' | 'tool') =>
      server.receive({ type: 'rpc/call', child: 'c1', call, method, payload: method === 'model' ? { provider: 'p' } : { name: 't', callId: 'x', args: {} } })
    call(1, 'model')
    call(2, 'model')
    emits[0]!({ type: 'text-delta', text: 'one' })
    emits[0]!({ type: 'text-delta', text: 'two' })
    expect(replies).toEqual([])
    // Another call's chunk: the first call's go before it is held.
    emits[1]!({ type: 'text-delta', text: 'uno' })
    expect(replies).toEqual([{ type: 'rpc/chunks', child: 'c1', call: 1, chunks: ['one', 'two'] }])
    // Another call's reply: what the second holds goes first.
    call(3, 'tool')
    await until(() => replies.length === 3, "the tool's result")
    expect(replies.slice(1)).toEqual([
      { type: 'rpc/chunks', child: 'c1', call: 2, chunks: ['uno'] },
      { type: 'rpc/result', child: 'c1', call: 3, value: { text: 'tool', concluded: false } },
    ])
    // A refused call: what the first holds now goes before the error.
    emits[0]!({ type: 'text-delta', text: 'three' })
    call(1, 'model')
    expect(replies.slice(3)).toEqual([{ type: 'rpc/chunks', child: 'c1', call: 1, chunks: ['three'] }, expect.objectContaining({ type: 'rpc/error', call: 1 })])
    for (const end of ends) end()
    await until(() => replies.length === 7, 'both results')
    expect(replies.slice(5)).toEqual([
      { type: 'rpc/result', child: 'c1', call: 1 },
      { type: 'rpc/result', child: 'c1', call: 2 },
    ])
  })

  it(`a call holding ${HELD_CHUNKS} chunks sends them and holds on, so no message grows without end; a closed server sends nothing it held`, async () => {
    const replies: RpcReply[] = []
    let emit!: (chunk: { type: 'text-delta'; text: string }) => boolean
    const server = new RpcServer('c1', { epoch: 0, push: (m) => replies.push(m) }, {
      model: (_payload, context) => ((emit = context.emit), new Promise(() => {})),
      tool: noTool,
      step: noStep,
    })
    server.receive({ type: 'rpc/call', child: 'c1', call: 1, method: 'model', payload: { provider: 'p' } })
    for (let i = 0; i < HELD_CHUNKS + 2; i++) emit({ type: 'text-delta', text: String(i) })
    expect(replies).toHaveLength(1)
    expect(replies[0]).toMatchObject({ type: 'rpc/chunks', call: 1 })
    expect((replies[0] as { chunks: unknown[] }).chunks).toEqual(Array.from({ length: HELD_CHUNKS }, (_, i) => String(i)))
    server.close({ kind: 'runner-gone' })
    await new Promise((resolve) => setImmediate(resolve))
    expect(replies).toHaveLength(1)
  })
  it(`a call holding ${HELD_BYTES} characters of text or tool-call arguments sends them and holds on`, async () => {
    const replies: RpcReply[] = []
    let emit!: (chunk: { type: 'text-delta'; text: string } | { type: 'tool-call'; id: string; name: string; arguments: string }) => boolean
    const server = new RpcServer('c1', { epoch: 0, push: (m) => replies.push(m) }, {
      model: (_payload, context) => ((emit = context.emit), new Promise(() => {})),
      tool: noTool,
      step: noStep,
    })
    server.receive({ type: 'rpc/call', child: 'c1', call: 1, method: 'model', payload: { provider: 'p' } })
    const third = 'x'.repeat(Math.ceil(HELD_BYTES / 3))
    emit({ type: 'text-delta', text: third })
    emit({ type: 'text-delta', text: third })
    expect(replies).toEqual([])
    emit({ type: 'text-delta', text: third })
    expect(replies).toEqual([{ type: 'rpc/chunks', child: 'c1', call: 1, chunks: [third, third, third] }])
    const args = JSON.stringify({ text: 'y'.repeat(HELD_BYTES) })
    emit({ type: 'tool-call', id: 'k', name: 'write', arguments: args })
    expect(replies[1]).toEqual({ type: 'rpc/chunks', child: 'c1', call: 1, chunks: [{ type: 'tool-call', id: 'k', name: 'write', arguments: args }] })
    server.close({ kind: 'runner-gone' })
  })
})

describe("a frame's text-only events, side by side in one texts (a node's relay)", () => {
  const events = (child: string, ...events: unknown[]) => ({ type: 'events', child, events })

  it("lays each text of every text-only events message in one list at the first one's place; others keep theirs", () => {
    const pong = { type: 'pong', n: 1 }
    const mixed = events('c', 'x', { seq: 1, type: 'turn/end', data: {} })
    const frame = [pong, events('a', 'one', 'two'), mixed, events('b', 'uno'), { type: 'idle', child: 'd', events: ['last'] }]
    expect(flatEvents(frame)).toEqual([pong, { type: 'texts', texts: ['a', 'one', 'a', 'two', 'b', 'uno'] }, mixed, frame[4]])
  })

  it("keeps a child's texts apart once anything else of that child came after the list's place", () => {
    const frame = [events('a', 'one'), { type: 'rpc/call', child: 'a' }, events('a', 'two'), events('b', 'uno')]
    expect(flatEvents(frame)).toEqual([{ type: 'texts', texts: ['a', 'one', 'b', 'uno'] }, frame[1], frame[2]])
  })

  it('returns a frame with no text-only events as it is', () => {
    const frame = [events('a', { seq: 0, type: 'turn/start', data: {} }), { type: 'created', child: 'b' }]
    expect(flatEvents(frame)).toBe(frame)
  })
})
