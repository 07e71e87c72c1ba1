/**
 * A host-placed model as a runner's loop reads it (src/worker/remote.ts): the call goes out at the
 * first pull, each text delta is recorded as it arrives (the host recorded it as it sent it) and
 * waits, joined with the next ones, until another chunk comes or the call ends; a failed call
 * gives its chunks first and then its error once, an abort ends a waiting pull with its reason at
 * once (the loop reads a stand-in without untilAbort), and a stream left before its first pull
 * asks nothing.
 */
import { describe, expect, it } from 'vitest'
import { RpcClient } from '../../dist/protocol/rpc.js'
import { isStandIn } from '../../dist/agent/models/model.js'
import { remoteModel } from '../../dist/worker/remote.js'
import { ToolTable } from '../../dist/worker/tool-table.js'
import type { RunnerMessage } from '../../dist/protocol/messages.js'

type CallMessage = Extract<RunnerMessage, { type: 'rpc/call' | 'rpc/cancel' }>

function host() {
  const sent: CallMessage[] = []
  const rpc = new RpcClient('c1', { epoch: 0, push: (message: CallMessage) => void sent.push(message) })
  const recorded: string[] = []
  const model = remoteModel(rpc, 'bench', new ToolTable([]), (text) => recorded.push(text), () => {})
  const abort = new AbortController()
  const stream = model.stream({ model: 'm', messages: [], signal: abort.signal })[Symbol.asyncIterator]()
  const reply = (chunks: Array<string | { type: 'finish'; reason: 'stop' } | { type: 'usage'; inputTokens: number; outputTokens: number }>, end?: 'result' | 'error') => {
    if (end === 'result') rpc.receive({ type: 'rpc/result', child: 'c1', call: 1, value: null, chunks })
    else if (end === 'error') {
      if (chunks.length > 0) rpc.receive({ type: 'rpc/chunks', child: 'c1', call: 1, chunks })
      rpc.receive({ type: 'rpc/error', child: 'c1', call: 1, error: { name: 'Error', message: 'the model failed', code: 'ERR_SUBAGENT_MODEL_STREAM' } })
    } else rpc.receive({ type: 'rpc/chunks', child: 'c1', call: 1, chunks })
  }
  return { sent, stream, reply, recorded, abort, model }
}

describe("a host model's stream in the runner", () => {
  it('asks the host at the first pull, not before', async () => {
    const { sent, stream, reply } = host()
    expect(sent).toEqual([])
    const first = stream.next()
    expect(sent).toMatchObject([{ type: 'rpc/call', child: 'c1', call: 1, method: 'model', payload: { provider: 'bench' } }])
    reply(['hello'], 'result')
    await expect(first).resolves.toEqual({ done: false, value: { type: 'text-delta', text: 'hello' } })
  })

  it('text deltas do not wake the loop: they wait, joined, until another chunk comes or the call ends, each chunk in its order', async () => {
    const { stream, reply } = host()
    let read: unknown
    const first = stream.next().then((step) => (read = step))
    reply(['a'])
    reply(['b', 'c'])
    // Every reaction has run by the next turn: the pull is still waiting.
    await new Promise((resolve) => setImmediate(resolve))
    expect(read).toBeUndefined()
    reply([{ type: 'usage', inputTokens: 1, outputTokens: 2 }, 'd'])
    await first
    expect(read).toEqual({ done: false, value: { type: 'text-delta', text: 'abc' } })
    expect(await stream.next()).toEqual({ done: false, value: { type: 'usage', inputTokens: 1, outputTokens: 2 } })
    reply(['e', { type: 'finish', reason: 'stop' }], 'result')
    expect(await stream.next()).toEqual({ done: false, value: { type: 'text-delta', text: 'de' } })
    expect(await stream.next()).toEqual({ done: false, value: { type: 'finish', reason: 'stop' } })
    expect(await stream.next()).toEqual({ done: true, value: undefined })
    expect(await stream.next()).toEqual({ done: true, value: undefined })
  })

  it("a failed call gives the chunks it sent first, then its error once; then the stream is over", async () => {
    const { stream, reply } = host()
    const first = stream.next()
    reply(['partial'], 'error')
    expect(await first).toEqual({ done: false, value: { type: 'text-delta', text: 'partial' } })
    await expect(stream.next()).rejects.toMatchObject({ message: 'the model failed', code: 'ERR_SUBAGENT_MODEL_STREAM' })
    expect(await stream.next()).toEqual({ done: true, value: undefined })
  })

  it('records each non-empty text delta as it arrives, before the loop reads it, and the loop does not record it again', async () => {
    const { stream, reply, recorded, model } = host()
    expect(isStandIn(model)).toBe(true)
    const first = stream.next()
    reply(['a', '', 'b'])
    expect(recorded).toEqual(['a', 'b'])
    reply([{ type: 'finish', reason: 'stop' }, 'c'], 'result')
    expect(recorded).toEqual(['a', 'b', 'c'])
    expect(await first).toEqual({ done: false, value: { type: 'text-delta', text: 'ab' } })
  })

  it('deltas that arrived before an abort are recorded though the loop never reads them; the call is cancelled', async () => {
    const { sent, stream, reply, recorded, abort } = host()
    const first = stream.next()
    reply(['read', { type: 'usage', inputTokens: 1, outputTokens: 1 }])
    await first
    reply(['unread'])
    abort.abort({ kind: 'cancelled' })
    reply(['late'])
    expect(recorded).toEqual(['read', 'unread'])
    expect(sent.map((m) => m.type)).toEqual(['rpc/call', 'rpc/cancel'])
  })

  it('an abort ends a waiting pull at once with its reason, deltas still unread included (they were recorded), and the host is told', async () => {
    const { sent, stream, reply, abort, recorded } = host()
    const first = stream.next()
    reply(['unread'])
    const reason = { kind: 'cancelled' }
    abort.abort(reason)
    await expect(first).rejects.toBe(reason)
    expect(recorded).toEqual(['unread'])
    expect(sent.map((m) => m.type)).toEqual(['rpc/call', 'rpc/cancel'])
    // Chunks or a result for the cancelled call change nothing.
    reply([{ type: 'finish', reason: 'stop' }], 'result')
    expect(await stream.next()).toEqual({ done: true, value: undefined })
  })

  it('a delta that comes after the loop left the stream is still recorded (the host recorded it), and nothing waits for it', async () => {
    const { stream, reply, recorded } = host()
    const first = stream.next()
    reply([{ type: 'usage', inputTokens: 1, outputTokens: 1 }])
    await first
    await stream.return!()
    reply(['after'], 'result')
    expect(recorded).toEqual(['after'])
    expect(await stream.next()).toEqual({ done: true, value: undefined })
  })

  it('a pull still waiting when the stream is left ends, done', async () => {
    const { stream } = host()
    const waiting = stream.next()
    await stream.return!()
    await expect(waiting).resolves.toEqual({ done: true, value: undefined })
  })

  it('a stream the loop leaves before its first pull never asks the host', async () => {
    const never = host()
    await never.stream.return!()
    expect(await never.stream.next()).toEqual({ done: true, value: undefined })
    expect(never.sent).toEqual([])
  })
})
