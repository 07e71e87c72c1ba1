/**
 * A small RPC for calls a child makes into the host (host-placed models and tools): request ids,
 * streamed chunks before the result, an abort message that becomes a local AbortSignal on the
 * far side, plain-object errors, and every pending call rejected when the channel closes. It
 * knows nothing of threads: each side gives it a `post` function and feeds it received messages.
 */
import type { ChildMessage, HostMessage, RpcTarget } from './lifecycle.js'
import { cloneableReason, fromWireError, toWireError } from './lifecycle.js'
import type { StreamChunk } from './stream.js'

type CallMessage = Extract<ChildMessage, { type: 'rpc/call' | 'rpc/abort' }>
type ReplyMessage = Extract<HostMessage, { type: 'rpc/chunk' | 'rpc/result' | 'rpc/error' }>

interface Pending {
  resolve(value: unknown): void
  reject(error: unknown): void
  onChunk?: (chunk: StreamChunk) => void
}

/** The calling side. */
export class RpcClient {
  readonly #post: (message: CallMessage) => void
  readonly #pending = new Map<number, Pending>()
  #nextId = 1
  #closed: Error | undefined

  constructor(post: (message: CallMessage) => void) {
    this.#post = post
  }

  call(target: RpcTarget, name: string, payload: unknown, options: { signal?: AbortSignal; onChunk?: (chunk: StreamChunk) => void } = {}): Promise<unknown> {
    if (this.#closed) return Promise.reject(this.#closed)
    const { signal, onChunk } = options
    if (signal?.aborted) return Promise.reject(signal.reason)
    const id = this.#nextId++
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        if (!this.#pending.delete(id)) return
        this.#post({ type: 'rpc/abort', id, reason: cloneableReason(signal!.reason) })
        reject(signal!.reason)
      }
      const settle = <T>(fn: (value: T) => void) => (value: T) => {
        signal?.removeEventListener('abort', onAbort)
        fn(value)
      }
      // Registered only once posted: a call that could not be sent must not wait for a reply.
      this.#post({ type: 'rpc/call', id, target, name, payload })
      if (this.#closed) return reject(this.#closed) // closed while posting
      this.#pending.set(id, { resolve: settle(resolve), reject: settle(reject), ...(onChunk ? { onChunk } : {}) })
      signal?.addEventListener('abort', onAbort, { once: true })
    })
  }

  /** Feeds a reply; replies for calls no longer pending (aborted) are dropped. */
  receive(message: ReplyMessage): void {
    const pending = this.#pending.get(message.id)
    if (!pending) return
    if (message.type !== 'rpc/error') for (const chunk of message.chunks ?? []) pending.onChunk?.(chunk)
    if (message.type === 'rpc/chunk') return
    this.#pending.delete(message.id)
    if (message.type === 'rpc/result') pending.resolve(message.value)
    else pending.reject(fromWireError(message.error))
  }

  /** Rejects every pending call and every later one. */
  close(error: Error): void {
    this.#closed ??= error
    for (const pending of this.#pending.values()) pending.reject(error)
    this.#pending.clear()
  }
}

export type RpcHandler = (
  target: RpcTarget,
  name: string,
  payload: unknown,
  context: { signal: AbortSignal; emit(chunk: StreamChunk): void },
) => Promise<unknown>

interface ActiveCall {
  controller: AbortController
  /** Chunks emitted since the last send: a fast stream crosses in a few messages, not one a chunk. */
  chunks: StreamChunk[]
  flushing: boolean
}

/** The serving side: runs each call with its own AbortController. */
export class RpcServer {
  readonly #post: (message: ReplyMessage) => void
  readonly #handler: RpcHandler
  readonly #active = new Map<number, ActiveCall>()

  constructor(post: (message: ReplyMessage) => void, handler: RpcHandler) {
    this.#post = post
    this.#handler = handler
  }

  receive(message: CallMessage): void {
    if (message.type === 'rpc/abort') {
      this.#active.get(message.id)?.controller.abort(message.reason)
      return
    }
    const { id, target, name, payload } = message
    const call: ActiveCall = { controller: new AbortController(), chunks: [], flushing: false }
    this.#active.set(id, call)
    const emit = (chunk: StreamChunk) => {
      if (this.#active.get(id) !== call) return
      call.chunks.push(chunk)
      if (call.flushing) return
      call.flushing = true
      setImmediate(() => {
        call.flushing = false
        if (this.#active.get(id) === call && call.chunks.length > 0) this.#post({ type: 'rpc/chunk', id, chunks: this.#take(call) })
      })
    }
    this.#handler(target, name, payload, { signal: call.controller.signal, emit }).then(
      (value) => {
        const chunks = this.#take(call)
        this.#reply(id, call, { type: 'rpc/result', id, ...(value === undefined ? {} : { value }), ...(chunks.length > 0 ? { chunks } : {}) })
      },
      (error) => {
        const chunks = this.#take(call)
        if (chunks.length > 0 && this.#active.get(id) === call) this.#post({ type: 'rpc/chunk', id, chunks })
        this.#reply(id, call, { type: 'rpc/error', id, error: toWireError(error) })
      },
    )
  }

  #take(call: ActiveCall): StreamChunk[] {
    const chunks = call.chunks
    call.chunks = []
    return chunks
  }

  #reply(id: number, call: ActiveCall, message: ReplyMessage): void {
    if (this.#active.get(id) !== call) return
    this.#active.delete(id)
    if (call.controller.signal.aborted) return
    try {
      this.#post(message)
    } catch (error) {
      // An uncloneable value must fail the call, not vanish; the chunks it carried still count.
      if (message.type === 'rpc/result' && message.chunks) this.#post({ type: 'rpc/chunk', id, chunks: message.chunks })
      this.#post({ type: 'rpc/error', id, error: toWireError(error) })
    }
  }

  /** Aborts every call still running (the far side is gone). */
  close(reason: unknown): void {
    for (const { controller } of this.#active.values()) controller.abort(reason)
    this.#active.clear()
  }
}
