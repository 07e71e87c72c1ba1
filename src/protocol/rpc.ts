/**
 * The typed RPC for calls a child makes into the host (host-placed models and tools). One method
 * map, shared by caller and server: each method's payload and result schema give both ends their
 * types, and the server checks every payload before a handler sees it (the host trusts nothing
 * the runner sends). Calls are addressed by child and numbered per child; a model call streams
 * its chunks before its result, each text delta as it was emitted (the host records each as an
 * event of the child as it sends it, and the runner as it receives it); an abort crosses as a
 * reason and becomes an aborted signal on the far side; every pending call rejects when the
 * channel closes. It knows nothing of threads: it reads and writes messages through a `Sink`.
 */
import { fromWireError, toWireError, WireError } from './shapes/error.js'
import { ToolRef } from './shapes/model.js'
import { sideBySide, type Sink } from './outbox.js'
import { anything, arrayOf, boolean, closed, object, ref, string, variant, type Wire } from './schema.js'
import { StreamChunk, type StreamChunkSchema } from './shapes/stream.js'
import { ProtocolError, validator, type Validator } from './validate.js'
import { cloneableReason } from './values.js'
import { subagentError } from './errors.js'

/**
 * A host-placed model's request, as the runner asks for it: which model, and the tools the child
 * sees. The rest the host has itself: the conversation is its own copy of the child's session,
 * and the model id, output cap and system prompt come from the child's spec.
 */
export const ModelCall = closed({ provider: string, tools: arrayOf(ToolRef) }, ['tools'])
export type ModelCall = Wire<typeof ModelCall>
export const ToolCall = closed({ name: string, callId: string, args: object })
export type ToolCall = Wire<typeof ToolCall>
export const ToolReply = closed({ text: string, concluded: boolean, value: anything }, ['value'])
export type ToolReply = Wire<typeof ToolReply>

/**
 * The method map, the one place a method is named: its payload and result checks. Both ends'
 * types derive from it (as comlink derives both ends from one interface).
 */
const RPC_METHODS = {
  /** Streams a host-placed model: chunks while it runs, then `null`. */
  model: { payload: validator(ModelCall), result: validator({ type: 'null' } as const) },
  /** Runs a host-placed tool: its rendered text, its value, and whether it concluded the turn. */
  tool: { payload: validator(ToolCall), result: validator(ToolReply) },
}
type Checked<V> = V extends Validator<infer T> ? T : never
export type RpcMethod = keyof typeof RPC_METHODS
export type RpcPayload<M extends RpcMethod> = Checked<(typeof RPC_METHODS)[M]['payload']>
export type RpcResult<M extends RpcMethod> = Checked<(typeof RPC_METHODS)[M]['result']>

const child = { type: 'string', minLength: 1 } as const
const call = { type: 'integer', minimum: 1 } as const
const method = { enum: Object.keys(RPC_METHODS) as RpcMethod[] }

/** Runner → host. */
export const RpcCall = variant('rpc/call', { child, call, method, payload: anything })
export const RpcCancel = variant('rpc/cancel', { child, call, reason: anything }, ['reason'])
export type RpcCall = Wire<typeof RpcCall>
export type RpcCancel = Wire<typeof RpcCancel>

/**
 * A streamed chunk as a model call's reply carries it: a text delta as its bare text, any other
 * chunk whole. One string crosses where the delta took an object.
 */
const wireChunks = { type: 'array', items: { anyOf: [string, ref(StreamChunk.$id)] } } as const
type WireChunk = Wire<(typeof wireChunks)['items'], [StreamChunkSchema]>

const toWireChunk = (chunk: StreamChunk): WireChunk => (chunk.type === 'text-delta' ? chunk.text : { ...chunk })
const fromWireChunk = (chunk: WireChunk): StreamChunk => (typeof chunk === 'string' ? { type: 'text-delta', text: chunk } : chunk)

/** Host → runner. */
export const RpcChunks = variant('rpc/chunks', { child, call, chunks: { ...wireChunks, minItems: 1 } })
/** The result; the call's last chunks ride with it when they were not sent yet. */
export const RpcReturn = variant('rpc/result', { child, call, value: anything, chunks: wireChunks }, ['value', 'chunks'])
export const RpcFailure = variant('rpc/error', { child, call, error: WireError })
/**
 * Host → runner: a frame's text deltas, of every child's model call, side by side (child,
 * call, text, child, call, text ...) in one list, where an `rpc/chunks` message a delta cost the
 * clone and the runner's check an object each (see flatTexts).
 */
export const RpcTexts = variant('rpc/texts', { texts: { type: 'array', minItems: 3, items: { anyOf: [string, call] } } })
type RpcChunks = Wire<typeof RpcChunks, [StreamChunkSchema]>
type RpcReturn = Wire<typeof RpcReturn, [StreamChunkSchema]>
export type RpcReply = RpcChunks | RpcReturn | Wire<typeof RpcFailure>

interface Pending {
  method: RpcMethod
  resolve(value: unknown): void
  reject(error: unknown): void
  onChunk: ((chunk: StreamChunk) => void) | undefined
}

/** The calling side, one per child. */
export class RpcClient {
  readonly #child: string
  readonly #sink: Sink<RpcCall | RpcCancel>
  readonly #pending = new Map<number, Pending>()
  #nextId = 1
  #closed: (() => Error) | undefined

  constructor(child: string, sink: Sink<RpcCall | RpcCancel>) {
    this.#child = child
    this.#sink = sink
  }

  call<M extends RpcMethod>(method: M, payload: RpcPayload<M>, options: { signal?: AbortSignal; onChunk?: (chunk: StreamChunk) => void } = {}): Promise<RpcResult<M>> {
    if (this.#closed) return Promise.reject(this.#closed())
    const { signal, onChunk } = options
    if (signal?.aborted) return Promise.reject(signal.reason)
    const id = this.#nextId++
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        if (!this.#pending.delete(id)) return
        this.#sink.push({ type: 'rpc/cancel', child: this.#child, call: id, reason: cloneableReason(signal!.reason) })
        reject(signal!.reason)
      }
      const settle = <T>(fn: (value: T) => void) => (value: T) => {
        signal?.removeEventListener('abort', onAbort)
        fn(value)
      }
      this.#pending.set(id, { method, resolve: settle(resolve as (value: unknown) => void), reject: settle(reject), onChunk })
      signal?.addEventListener('abort', onAbort, { once: true })
      this.#sink.push({ type: 'rpc/call', child: this.#child, call: id, method, payload })
    })
  }

  /** Feeds a reply; replies for calls no longer pending (aborted) are dropped. */
  receive(reply: RpcReply): void {
    const pending = this.#pending.get(reply.call)
    if (!pending) return
    if (reply.type !== 'rpc/error') for (const chunk of reply.chunks ?? []) pending.onChunk?.(fromWireChunk(chunk))
    if (reply.type === 'rpc/chunks') return
    this.#pending.delete(reply.call)
    if (reply.type === 'rpc/error') pending.reject(fromWireError(reply.error))
    else if (RPC_METHODS[pending.method].result(reply.value ?? null)) pending.resolve(reply.value ?? null)
    else pending.reject(new ProtocolError(`the host sent a malformed result for a "${pending.method}" call`))
  }

  /** A text delta of call `call`, from a frame's `rpc/texts`; dropped, as any reply is, when the call is no longer pending. */
  text(call: number, text: string): void {
    this.#pending.get(call)?.onChunk?.({ type: 'text-delta', text })
  }

  /** Rejects every pending call and every later one with an Error saying `why` (made only when needed). */
  close(why: string): void {
    if (this.#closed) return
    let error: Error | undefined
    this.#closed = () => (error ??= subagentError('ERR_SUBAGENT_CHANNEL_CLOSED', why))
    for (const pending of this.#pending.values()) pending.reject(this.#closed())
    this.#pending.clear()
  }
}

export interface CallContext {
  signal: AbortSignal
  /** Streams a chunk back (model calls); false when the call is over or muted, and nothing was sent. */
  emit(chunk: StreamChunk): boolean
}

export type RpcHandlers = { [M in RpcMethod]: (payload: RpcPayload<M>, context: CallContext) => Promise<RpcResult<M>> }

interface ActiveCall {
  method: RpcMethod
  controller: AbortController
  /**
   * Its controller was aborted (only this server aborts it): read on every chunk, where the
   * signal's own getter checks its receiver first.
   */
  cancelled: boolean
  /** The chunks message queued in the sink's current epoch, still open for more chunks (or for the result). */
  open: { message: RpcChunks | RpcReturn; epoch: number } | undefined
}

/** The serving side, one per child: checks each payload, then runs its handler with its own AbortController. */
export class RpcServer {
  readonly #child: string
  readonly #sink: Sink<RpcReply>
  readonly #handlers: RpcHandlers
  readonly #active = new Map<number, ActiveCall>()
  /** Calls of this method stream nothing more (see mute). */
  #muted: RpcMethod | undefined

  constructor(child: string, sink: Sink<RpcReply>, handlers: RpcHandlers) {
    this.#child = child
    this.#sink = sink
    this.#handlers = handlers
  }

  /** Calls running and not cancelled: what the caller's own bound (its loop's) allows it. */
  get running(): number {
    let running = 0
    for (const { cancelled } of this.#active.values()) if (!cancelled) running++
    return running
  }

  receive(message: RpcCall | RpcCancel): void {
    if (message.type === 'rpc/cancel') {
      const active = this.#active.get(message.call)
      if (active) cancel(active, message.reason)
      return
    }
    const id = message.call
    if (this.#active.has(id)) return this.#fail(id, new ProtocolError(`rpc call ${id} is already running`))
    const check = RPC_METHODS[message.method].payload
    if (!check(message.payload)) {
      return this.#fail(id, new ProtocolError(`invalid payload for rpc method "${message.method}": ${check.explain(message.payload, 'payload')}`))
    }
    const active: ActiveCall = { method: message.method, controller: new AbortController(), cancelled: false, open: undefined }
    this.#active.set(id, active)
    const context: CallContext = { signal: active.controller.signal, emit: (chunk) => this.#emit(id, active, chunk) }
    const handler = this.#handlers[message.method] as (payload: unknown, context: CallContext) => Promise<unknown>
    handler(message.payload, context).then(
      (value) => this.#return(id, active, value),
      (error: unknown) => this.#reply(id, active, { type: 'rpc/error', child: this.#child, call: id, error: toWireError(error) }),
    )
  }

  /**
   * Its calls of `method`, running and later ones, stream nothing more from now on (a cancelled
   * child's model: the host told the caller to stop, which cancels them itself).
   */
  mute(method: RpcMethod): void {
    this.#muted = method
  }

  /** Aborts every call still running (the far side is gone). */
  close(reason: unknown): void {
    for (const active of this.#active.values()) cancel(active, reason)
    this.#active.clear()
  }

  #emit(id: number, active: ActiveCall, chunk: StreamChunk): boolean {
    if (this.#active.get(id) !== active || active.cancelled || active.method === this.#muted) return false
    const chunks = this.#open(active)?.chunks
    if (chunks) {
      chunks.push(toWireChunk(chunk))
    } else {
      const message = { type: 'rpc/chunks' as const, child: this.#child, call: id, chunks: [toWireChunk(chunk)] }
      active.open = { message, epoch: this.#sink.epoch }
      this.#sink.push(message)
    }
    return true
  }

  /** The chunks message still queued in this epoch, if any. */
  #open(active: ActiveCall): { chunks?: WireChunk[] } | undefined {
    return active.open?.epoch === this.#sink.epoch ? active.open.message : undefined
  }

  /** A result whose last chunks are still queued turns that message into the result: one message, not two. */
  #return(id: number, active: ActiveCall, value: unknown): void {
    const open = this.#open(active) as RpcReturn | undefined
    if (!open || this.#active.get(id) !== active || active.cancelled) {
      return this.#reply(id, active, { type: 'rpc/result', child: this.#child, call: id, ...(value === null ? {} : { value }) })
    }
    this.#active.delete(id)
    open.type = 'rpc/result'
    if (value !== null) open.value = value
  }

  #reply(id: number, active: ActiveCall, reply: RpcReply): void {
    if (this.#active.get(id) !== active) return
    this.#active.delete(id)
    if (!active.cancelled) this.#sink.push(reply)
  }

  #fail(id: number, error: Error): void {
    this.#sink.push({ type: 'rpc/error', child: this.#child, call: id, error: toWireError(error) })
  }
}

function cancel(active: ActiveCall, reason: unknown): void {
  active.cancelled = true
  active.controller.abort(reason)
}

type FlatTexts = Wire<typeof RpcTexts>
/** The messages of a frame, as far as flatTexts reads them. */
type Flattened = { type: string; child?: string; call?: number; chunks?: unknown[] }

/**
 * A frame with its text-only `rpc/chunks` messages (S9's fan-in sends one a child and delta) side
 * by side in one `rpc/texts`, at the first one's place, each child's messages in their order.
 */
export function flatTexts<M extends Flattened>(frame: M[]): Array<M | FlatTexts> {
  return sideBySide(frame, joinTexts, (texts: FlatTexts['texts']): FlatTexts => ({ type: 'rpc/texts', texts }))
}

function joinTexts(message: Flattened, texts: FlatTexts['texts']): boolean {
  if (message.type !== 'rpc/chunks' || !message.chunks!.every((chunk) => typeof chunk === 'string')) return false
  for (const text of message.chunks as string[]) texts.push(message.child!, message.call!, text)
  return true
}

/**
 * Calls `each` with every (child, call, text) of an `rpc/texts` list, once the whole list was
 * read as such; when it is not, calls it for none and says why.
 */
export function forEachText(texts: ReadonlyArray<string | number>, each: (child: string, call: number, text: string) => void): ProtocolError | undefined {
  let read = texts.length % 3 === 0
  // The frame's check has read each item as a text or a call number: here, each at its place.
  for (let i = 0; read && i < texts.length; i += 3) read = typeof texts[i] === 'string' && typeof texts[i + 1] === 'number' && typeof texts[i + 2] === 'string'
  if (!read) return new ProtocolError(`the host sent an 'rpc/texts' message whose ${texts.length} items are not a child, a call and a text each`)
  for (let i = 0; i < texts.length; i += 3) each(texts[i] as string, texts[i + 1] as number, texts[i + 2] as string)
  return undefined
}
