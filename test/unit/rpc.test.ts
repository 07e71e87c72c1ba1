/** The RPC in src/protocol: ids, streamed chunks, abort crossing as a reason, no hung call on close. */
import { describe, expect, it } from 'vitest'
import { RpcClient, RpcServer, type RpcHandler } from '../../dist/protocol/rpc.js'
import type { ChildMessage, HostMessage } from '../../dist/protocol/lifecycle.js'

/** A client and a server wired back to back through structuredClone, as a port would. */
function pair(handler: RpcHandler) {
  let server!: RpcServer
  const client = new RpcClient((message) => queueMicrotask(() => server.receive(structuredClone(message) as Extract<ChildMessage, { type: 'rpc/call' | 'rpc/abort' }>)))
  server = new RpcServer((message) => queueMicrotask(() => client.receive(structuredClone(message) as Extract<HostMessage, { type: 'rpc/chunk' }>)), handler)
  return { client, server }
}

describe('rpc', () => {
  it('streams chunks before the result, in order', async () => {
    const { client } = pair(async (_target, _name, payload, { emit }) => {
      emit({ type: 'text-delta', text: 'a' })
      emit({ type: 'text-delta', text: 'b' })
      return { echoed: payload }
    })
    const chunks: string[] = []
    const value = await client.call('model', 'm', { x: 1 }, { onChunk: (c) => chunks.push(c.type === 'text-delta' ? c.text : '?') })
    expect(chunks).toEqual(['a', 'b'])
    expect(value).toEqual({ echoed: { x: 1 } })
  })

  it('rejects with the remote error, keeping its name and code', async () => {
    const { client } = pair(async () => {
      throw Object.assign(new RangeError('too far'), { code: 'E_FAR' })
    })
    await expect(client.call('tool', 't', {})).rejects.toMatchObject({ name: 'RangeError', message: 'too far', code: 'E_FAR' })
  })

  it('an abort rejects locally at once and reaches the far side as an aborted signal with the reason', async () => {
    let remote: AbortSignal | undefined
    const { client } = pair(
      (_t, _n, _p, { signal }) =>
        new Promise((resolve) => {
          remote = signal
          signal.addEventListener('abort', () => resolve('late'), { once: true })
        }),
    )
    const controller = new AbortController()
    const call = client.call('tool', 't', {}, { signal: controller.signal })
    await new Promise((resolve) => setTimeout(resolve, 5))
    controller.abort({ kind: 'parent' })
    await expect(call).rejects.toEqual({ kind: 'parent' })
    await new Promise((resolve) => setTimeout(resolve, 5))
    expect(remote?.aborted).toBe(true)
    expect(remote?.reason).toEqual({ kind: 'parent' })
  })

  it('closing rejects every pending call and every later one: nothing hangs', async () => {
    const { client } = pair(() => new Promise(() => {}))
    const pending = [client.call('model', 'm', {}), client.call('tool', 't', {})]
    client.close(new Error('port closed'))
    for (const call of pending) await expect(call).rejects.toThrow('port closed')
    await expect(client.call('tool', 't', {})).rejects.toThrow('port closed')
  })

  it('a server close aborts every running handler', async () => {
    const signals: AbortSignal[] = []
    const { client, server } = pair((_t, _n, _p, { signal }) => {
      signals.push(signal)
      return new Promise(() => {})
    })
    void client.call('tool', 'a', {}).catch(() => {})
    void client.call('tool', 'b', {}).catch(() => {})
    await new Promise((resolve) => setTimeout(resolve, 5))
    server.close({ kind: 'worker-gone' })
    expect(signals.map((s) => s.aborted)).toEqual([true, true])
  })

  it('an uncloneable result becomes an error instead of vanishing', async () => {
    let server!: RpcServer
    const client = new RpcClient((message) => queueMicrotask(() => server.receive(message)))
    server = new RpcServer((message) => client.receive(structuredClone(message)), async () => ({ fn: () => 1 }))
    await expect(client.call('tool', 't', {})).rejects.toThrow(/could not be cloned/)
  })
})
