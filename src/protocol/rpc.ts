/**
 * The typed RPC for calls a child makes into the host (host-placed models and tools). One method
 * map, shared by caller and server: each method's payload and result schema give both ends their
 * types, and the server checks every payload before a handler sees it (the host trusts nothing
 * the runner sends). Calls are addressed by child and numbered per child; a model call's chunks
 * cross before or with its result, in the order they were emitted (the host records each text
 * delta as an event of the child as it streams, and the runner as it receives it); an abort
 * crosses as a reason and becomes an aborted signal on the far side; every pending call rejects
 * when the channel closes. It knows nothing of threads: it reads and writes messages through a
 * `Sink`.
 */
import { fromWireError, toWireError, WireError } from './shapes/error.js'
import { ToolRef } from './shapes/model.js'
import type { Sink } from './outbox.js'
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
 * The host's verdict on a step, what a model call ends with and a step call answers: `null`, or
 * the limit the host found spent once it counted the step (its tokens, or a limit above the
 * child), which the runner's child stops on before any call of the step runs, as an inline
 * child's loop is stopped at that step's record (CONTRACT.md §11).
 */
const LimitVerdict = {
  anyOf: [
    { type: 'null' },
    closed({ limit: closed({ kind: { const: 'limit' }, limit: { enum: ['timeoutMs', 'maxSteps', 'maxTotalTokens'] }, value: { type: 'integer', minimum: 1 } }) }),
  ],
} as const

/**
 * The method map, the one place a method is named: its payload and result checks. Both ends'
 * types derive from it (as comlink derives both ends from one interface).
 */
const RPC_METHODS = {
  /** Streams a host-placed model: chunks while it runs, then the host's verdict on its step (LimitVerdict). */
  model: { payload: validator(ModelCall), result: validator(LimitVerdict) },
  /** Runs a host-placed tool: its rendered text, its value, and whether it concluded the turn. */
  tool: { payload: validator(ToolCall), result: validator(ToolReply) },
  /**
   * Asks whether the step the child recorded before the call may run its calls: what the host
   * found spent once it counted that record (a module model's step, whose tokens only its record
   * tells the host), as a model call's end says it of a host model's step.
   */
  step: { payload: validator(closed({})), result: validator(LimitVerdict) },
}
type Checked<V> = V extends Validator<infer T> ? T : never
export type RpcMethod = keyof typeof RPC_METHODS
export type RpcPayload<M extends RpcMethod> = Checked<(typeof RPC_METHODS)[M]['payload']>
export type RpcResult<M extends RpcMethod> = Checked<(typeof RPC_METHODS)[M]['result']>

const child = { type: 'string', minLength: 1 } as const
const call = { type: 'integer', minimum: 1 } as const
const method = { enum: Object.keys(RPC_METHODS) as RpcMethod[] }

/** Runner → host. A call's fields, for a protocol that carries more with it (messages.ts: a child's events). */
export const RpcCallFields = { child, call, method, payload: anything } as const
export const RpcCall = variant('rpc/call', RpcCallFields)
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
type RpcChunks = Wire<typeof RpcChunks, [StreamChunkSchema]>
type RpcReturn = Wire<typeof RpcReturn, [StreamChunkSchema]>
export type RpcReply = RpcChunks | RpcReturn | Wire<typeof RpcFailure>

/** What a caller may give a call: a signal that cancels it, and where a model call's chunks go as they arrive. */
export interface CallOptions {
  signal?: AbortSignal
  onChunk?(chunk: StreamChunk): void
}

interface Pending {
  method: RpcMethod
  options: CallOptions
  /** The signal it follows (the options' when it was called). */
  signal: AbortSignal | undefined
  resolve(value: unknown): void
  reject(error: unknown): void
  /** Cancels the call when its signal aborts; removed when the call ends. */
  onAbort: (() => void) | undefined
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

  call<M extends RpcMethod>(method: M, payload: RpcPayload<M>, options: CallOptions = {}): Promise<RpcResult<M>> {
    if (this.#closed) return Promise.reject(this.#closed())
    const { signal } = options
    if (signal?.aborted) return Promise.reject(signal.reason)
    const id = this.#nextId++
    return new Promise((resolve, reject) => {
      const pending: Pending = { method, options, signal, resolve: resolve as (value: unknown) => void, reject, onAbort: undefined }
      if (signal) {
        pending.onAbort = () => this.#cancel(id, signal)
        signal.addEventListener('abort', pending.onAbort, { once: true })
      }
      this.#pending.set(id, pending)
      this.#sink.push({ type: 'rpc/call', child: this.#child, call: id, method, payload })
    })
  }

  /** Feeds a reply; replies for calls no longer pending (aborted) are dropped. */
  receive(reply: RpcReply): void {
    const pending = this.#pending.get(reply.call)
    if (!pending) return
    const { onChunk } = pending.options
    if (reply.type !== 'rpc/error' && reply.chunks && onChunk) for (const chunk of reply.chunks) onChunk.call(pending.options, fromWireChunk(chunk))
    if (reply.type === 'rpc/chunks') return
    this.#end(reply.call, pending)
    if (reply.type === 'rpc/error') pending.reject(fromWireError(reply.error))
    else if (RPC_METHODS[pending.method].result(reply.value ?? null)) pending.resolve(reply.value ?? null)
    else pending.reject(new ProtocolError(`the host sent a malformed result for a "${pending.method}" call`))
  }

  /** Rejects every pending call and every later one with an Error saying `why` (made only when needed). */
  close(why: string): void {
    if (this.#closed) return
    let error: Error | undefined
    this.#closed = () => (error ??= subagentError('ERR_SUBAGENT_CHANNEL_CLOSED', why))
    for (const [id, pending] of this.#pending) {
      this.#end(id, pending)
      pending.reject(this.#closed())
    }
  }

  /** Its signal aborted: the host is told, and the call rejects with the abort's reason. */
  #cancel(id: number, signal: AbortSignal): void {
    const pending = this.#pending.get(id)
    if (!pending) return
    this.#end(id, pending)
    this.#sink.push({ type: 'rpc/cancel', child: this.#child, call: id, reason: cloneableReason(signal.reason) })
    pending.reject(signal.reason)
  }

  /** The call is no longer pending, and its signal no longer followed. */
  #end(id: number, pending: Pending): void {
    this.#pending.delete(id)
    if (pending.onAbort) pending.signal!.removeEventListener('abort', pending.onAbort)
  }
}

export interface CallContext {
  signal: AbortSignal
  /** Streams a chunk back (model calls); false when the call is over or muted, and nothing was sent. */
  emit(chunk: StreamChunk): boolean
}

/** What serves each method: called as a method of this object (a class's instance may serve them). */
export type RpcHandlers = { [M in RpcMethod]: (payload: RpcPayload<M>, context: CallContext) => Promise<RpcResult<M>> }

interface ActiveCall {
  method: RpcMethod
  controller: AbortController
  /**
   * Its controller was aborted (only this server aborts it): read on every chunk, where the
   * signal's own getter checks its receiver first.
   */
  cancelled: boolean
}

/**
 * What one call holds before it sends it: a call's whole stream, as a rule, crosses with its
 * result. More chunks than this, or more characters of text (deltas, and a tool call's
 * arguments), and what it holds is sent as it is, so no one message grows without end.
 */
export const HELD_CHUNKS = 4096
export const HELD_BYTES = 1024 * 1024

/** What a chunk adds to a held message, in characters: its text, or a tool call's arguments. */
const heldSize = (chunk: WireChunk): number => (typeof chunk === 'string' ? chunk.length : chunk.type === 'tool-call' ? chunk.arguments.length + chunk.name.length : 0)

/**
 * The serving side, one per child: checks each payload, then runs its handler with its own
 * AbortController.
 *
 * A model call's chunks are held, not sent as they come: they cross with the call's result, in
 * one message, or before anything else this server sends (a reply, a mute: the abort that follows
 * it). The host records a host model's text as it streams (host-calls.ts), and the caller's loop
 * reads a step's chunks only once the stream is over, so nothing on the far side waits for them;
 * a thousand children streaming at once then wake their runners once a step, not once a chunk.
 * The far side gets every chunk in the order the host recorded it, before anything this server
 * sends after it: both records hold the same events in the same order when the step ends.
 */
export class RpcServer {
  readonly #child: string
  readonly #sink: Sink<RpcReply>
  readonly #handlers: RpcHandlers
  readonly #active = new Map<number, ActiveCall>()
  /** Calls of this method stream nothing more, and no later one is served (see mute). */
  #muted: RpcMethod | undefined
  /** The chunks one call streamed and this server did not send yet: one call's at a time, so they cross in the order they came. */
  #held: { active: ActiveCall; message: RpcChunks; size: number } | undefined

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
      if (!active) return
      // What it streamed before the cancel goes as it would have without holding: the caller drops it.
      if (this.#held?.active === active) this.#release()
      cancel(active, message.reason)
      return
    }
    const id = message.call
    if (message.method === this.#muted) return
    if (this.#active.has(id)) return this.#fail(id, new ProtocolError(`rpc call ${id} is already running`))
    const check = RPC_METHODS[message.method].payload
    if (!check(message.payload)) {
      return this.#fail(id, new ProtocolError(`invalid payload for rpc method "${message.method}": ${check.explain(message.payload, 'payload')}`))
    }
    const active: ActiveCall = { method: message.method, controller: new AbortController(), cancelled: false }
    this.#active.set(id, active)
    const context: CallContext = { signal: active.controller.signal, emit: (chunk) => this.#emit(id, active, chunk) }
    const handler = this.#handlers[message.method] as (payload: unknown, context: CallContext) => Promise<unknown>
    handler.call(this.#handlers, message.payload, context).then(
      (value) => this.#return(id, active, value),
      (error: unknown) => this.#reply(id, active, { type: 'rpc/error', child: this.#child, call: id, error: toWireError(error) }),
    )
  }

  /**
   * Its calls of `method` stop (a cancelled child's model): what they streamed before goes now,
   * ahead of whatever is sent next; the running ones stop now, with `reason` (the caller's cancel,
   * not the copy of it the far side would send back), and stream nothing more; a later one (made
   * before the far side heard it is cancelled) is not served at all, and its caller, told to
   * stop, cancels it itself.
   */
  mute(method: RpcMethod, reason: unknown): void {
    this.#release()
    this.#muted = method
    for (const active of this.#active.values()) if (active.method === method && !active.cancelled) cancel(active, reason)
  }

  /** Aborts every call still running (the far side is gone: what they hold goes nowhere). */
  close(reason: unknown): void {
    this.#held = undefined
    for (const active of this.#active.values()) cancel(active, reason)
    this.#active.clear()
  }

  #emit(id: number, active: ActiveCall, chunk: StreamChunk): boolean {
    // A muted method's running calls were cancelled by the mute, and later ones are not served.
    if (this.#active.get(id) !== active || active.cancelled) return false
    const wire = toWireChunk(chunk)
    let held = this.#held
    if (held?.active === active) {
      held.message.chunks.push(wire)
    } else {
      this.#release()
      held = this.#held = { active, message: { type: 'rpc/chunks', child: this.#child, call: id, chunks: [wire] }, size: 0 }
    }
    held.size += heldSize(wire)
    if (held.message.chunks.length >= HELD_CHUNKS || held.size >= HELD_BYTES) this.#release()
    return true
  }

  /** Sends what a call holds, if one does. */
  #release(): void {
    const held = this.#held
    if (!held) return
    this.#held = undefined
    this.#sink.push(held.message)
  }

  /** The result takes the chunks its call still holds: one message, not two. */
  #return(id: number, active: ActiveCall, value: unknown): void {
    const held = this.#held
    if (held?.active !== active || this.#active.get(id) !== active || active.cancelled) {
      return this.#reply(id, active, { type: 'rpc/result', child: this.#child, call: id, ...(value === null ? {} : { value }) })
    }
    this.#held = undefined
    this.#active.delete(id)
    const result: RpcReturn = Object.assign(held.message, { type: 'rpc/result' as const })
    if (value !== null) result.value = value
    this.#sink.push(result)
  }

  #reply(id: number, active: ActiveCall, reply: RpcReply): void {
    if (this.#active.get(id) !== active) return
    this.#active.delete(id)
    this.#release()
    if (!active.cancelled) this.#sink.push(reply)
  }

  #fail(id: number, error: Error): void {
    this.#release()
    this.#sink.push({ type: 'rpc/error', child: this.#child, call: id, error: toWireError(error) })
  }
}

function cancel(active: ActiveCall, reason: unknown): void {
  active.cancelled = true
  active.controller.abort(reason)
}
