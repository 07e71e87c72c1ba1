/** Stand-ins for host-placed models and tools: each call goes to the host over the typed RPC. */
import { standIn, type Model, type ModelRequest } from '../agent/models/model.js'
import { RenderedValue } from '../agent/tools/tool-call.js'
import { ToolError, type ToolDefinition } from '../agent/tools/tools.js'
import type { RemoteToolDescriptor } from '../protocol/shapes/child.js'
import type { RpcClient, RpcPayload } from '../protocol/rpc.js'
import type { StreamChunk } from '../protocol/shapes/stream.js'
import { isToolErrorCode } from '../protocol/validators.js'
import type { ToolTable } from './tool-table.js'
import type { LimitReason } from '../agent/limit-stop.js'

/**
 * `record` records a text delta in the child's session as it arrives: the host recorded it as the
 * model streamed it (host-calls.ts), so it does not cross back, and the two records keep the same
 * seqs, an aborted stream's deltas that the loop never read included. The host holds a call's
 * chunks until its result (RpcServer), so they mostly come together; the loop reads a delta only
 * to build its step's message, so deltas do not wake it: they wait, joined, until another chunk
 * comes or the call ends.
 */
export function remoteModel(rpc: RpcClient, provider: string, table: ToolTable, record: (text: string) => void, limitAtRecord: (limit: LimitReason) => void): Model {
  return standIn({ stream: (request: ModelRequest) => new RemoteStream(rpc, provider, table, record, limitAtRecord, request) })
}

/** What a pull gets: a step of the stream, or the call's failure. */
type Pulled = IteratorResult<StreamChunk> | { failed: unknown }

const settled = (pulled: Pulled): Promise<IteratorResult<StreamChunk>> => ('failed' in pulled ? Promise.reject(pulled.failed) : Promise.resolve(pulled))

/**
 * One call of a host model, read as a stream: a plain iterator rather than an async generator,
 * since the loop pulls it chunk by chunk and a generator would add a promise and a request of its
 * own to every pull. The call goes out at the first pull (a stream left before it asks nothing),
 * and it is the call's options itself (its `signal` and `onChunk`). An abort ends the call at
 * once with the abort's reason, so a stand-in needs no `untilAbort`.
 */
class RemoteStream implements AsyncIterableIterator<StreamChunk> {
  readonly signal: AbortSignal
  readonly #rpc: RpcClient
  readonly #data: RpcPayload<'model'>
  readonly #record: (text: string) => void
  readonly #limitAtRecord: (limit: LimitReason) => void
  /** What came and was not read yet, in order: other chunks, and runs of text deltas. */
  readonly #queue: Array<StreamChunk | string[]> = []
  /** The pull waiting for a chunk, if one is (the loop makes one at a time). */
  #pull: { resolve(step: IteratorResult<StreamChunk>): void; reject(error: unknown): void } | undefined
  /** Not asked yet; asked (the call runs); ended (it settled: a failure waits behind the chunks before it); or left by the loop. */
  #state: 'new' | 'asked' | 'ended' | 'left' = 'new'
  #failure: { failed: unknown } | undefined

  constructor(rpc: RpcClient, provider: string, table: ToolTable, record: (text: string) => void, limitAtRecord: (limit: LimitReason) => void, request: ModelRequest) {
    this.#rpc = rpc
    this.#record = record
    this.#limitAtRecord = limitAtRecord
    this.signal = request.signal
    // The host serves the child's model with what it has itself (host-calls.ts): the conversation
    // from its copy of the session, the system prompt it composed, the model id and cap of the
    // spec. Only the tools the child sees are the runner's to say.
    const { tools } = request
    this.#data = tools ? { provider, tools: table.refer(tools) } : { provider }
  }

  [Symbol.asyncIterator](): this {
    return this
  }

  next(): Promise<IteratorResult<StreamChunk>> {
    if (this.#state === 'new') this.#ask()
    const pulled = this.#take()
    if (pulled) return settled(pulled)
    return new Promise((resolve, reject) => (this.#pull = { resolve, reject }))
  }

  return(): Promise<IteratorResult<StreamChunk>> {
    this.#state = 'left'
    this.#queue.length = 0
    this.#failure = undefined
    const pull = this.#pull
    this.#pull = undefined
    pull?.resolve({ done: true, value: undefined })
    return Promise.resolve({ done: true, value: undefined })
  }

  /**
   * A chunk of the call. A text delta is recorded now, read or not (the host recorded it as it
   * sent it), and waits, joined with the next ones, for a chunk that wakes the loop.
   */
  onChunk(chunk: StreamChunk): void {
    if (chunk.type === 'text-delta') {
      if (chunk.text === '') return
      this.#record(chunk.text)
      if (this.#state === 'left') return
      const last = this.#queue.at(-1)
      if (Array.isArray(last)) last.push(chunk.text)
      else this.#queue.push([chunk.text])
    } else if (this.#state !== 'left') {
      this.#queue.push(chunk)
      this.#wake()
    }
  }

  #ask(): void {
    this.#state = 'asked'
    this.#rpc.call('model', this.#data, this).then(
      (end) => {
        // Before the loop reads the end and records the step: its child stops as it does.
        if (end?.limit && this.#state === 'asked') this.#limitAtRecord(end.limit)
        this.#end(undefined)
      },
      (error: unknown) => this.#end({ failed: error }),
    )
  }

  #end(failure: { failed: unknown } | undefined): void {
    if (this.#state !== 'asked') return
    this.#state = 'ended'
    this.#failure = failure
    // An abort ends the stream now, as untilAbort would: deltas still unread were recorded, and
    // the aborted step reads no more of them. Any other failure comes after what came before it.
    if (failure && this.signal.aborted) this.#queue.length = 0
    this.#wake()
  }

  /** Settles the waiting pull, if one is and something is there for it. */
  #wake(): void {
    const pull = this.#pull
    const pulled = pull && this.#take()
    if (!pulled) return
    this.#pull = undefined
    if ('failed' in pulled) pull.reject(pulled.failed)
    else pull.resolve(pulled)
  }

  /** What the next pull gets, if it is there: a chunk, a run of deltas joined, the call's failure (once), or the end. */
  #take(): Pulled | undefined {
    const item = this.#queue.shift()
    if (Array.isArray(item)) return { done: false, value: { type: 'text-delta', text: item.join('') } }
    if (item) return { done: false, value: item }
    if (this.#state === 'new' || this.#state === 'asked') return undefined
    const failure = this.#failure
    this.#failure = undefined
    return failure ?? { done: true, value: undefined }
  }
}

export function remoteTool(rpc: RpcClient, descriptor: RemoteToolDescriptor): ToolDefinition {
  return {
    ...descriptor,
    async execute(args, exec) {
      try {
        const reply = await rpc.call('tool', { name: descriptor.name, callId: exec.callId, args }, { signal: exec.signal })
        if (reply.concluded) exec.concludeTurn()
        return new RenderedValue(reply.value, reply.text)
      } catch (error) {
        // A deliberate tool error (the tool's own, or the host's refusal) stays deliberate: exact text and code.
        const { name, message, code } = error as { name?: string; message?: string; code?: unknown }
        if (name === 'ToolError') throw new ToolError(message ?? '', isToolErrorCode(code) ? code : 'FAILED')
        throw error
      }
    },
  }
}
