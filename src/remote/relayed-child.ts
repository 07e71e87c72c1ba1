/**
 * A node's handle on one child it took from the queue: it runs on one of the node's threads and
 * is answered for to its host. The node relays, it does not interpret: the thread's messages go
 * to the host as they are (but for the module tools a model call names by index in its thread's
 * table, which the node gives their schemas back: its threads may differ), the host's to the thread. What only the node can do, it does here:
 * enforce the grace after an abort (terminating the thread, as the host does on its own threads)
 * and report the end of a thread the child was on (`ended`).
 *
 * Thread-mates survive (CONTRACT.md §8): when its thread goes for a fault the child did not
 * cause, the node says so (`ended` with `movable`) and holds the child, off any thread, until
 * the host, which alone knows where the child was, answers: a `create` rebuilds it on another of
 * the node's threads, a `drop` lets it go.
 *
 *   placed ──thread gone, movable──▶ held ──create──▶ placed
 *      │                               │
 *      └── final message, drop, thread gone, host gone ──▶ gone ◀── drop, host gone
 */
import type { ChannelChild, Fault, RunnerChannel } from '../parent/runners/channel.js'
import { startGrace } from '../parent/runners/grace.js'
import type { Mobility, RunnerHooks } from '../parent/runners/move-point.js'
import type { HostMessage, RunnerMessage } from '../protocol/messages.js'
import { toWireError } from '../protocol/shapes/error.js'
import { messageOf } from '../protocol/errors.js'
import type { CreateMessage } from './envelope.js'
import type { ToolSchema } from '../protocol/shapes/model.js'

/** The host's end, as a child sees it. */
export interface HostEnd {
  /** Names the node in diagnostics: 'node <id>'. */
  readonly label: string
  send(message: RunnerMessage): void
  /** The hooks of the module the child's thread loaded, for the host's move judgement. */
  ready(hooks: RunnerHooks): void
  forget(child: RelayedChild): void
}

/** Finds a held child a slot on another of the node's threads: `build` runs with the chosen one. */
export type PlaceAgain = (signal: AbortSignal, build: (thread: RunnerChannel) => void) => Promise<void>

/** The messages that end a child on its thread: the host learns of them and the slot is free. */
const FINAL = new Set<RunnerMessage['type']>(['idle', 'create-failed', 'failed'])

type Phase = 'placed' | 'held' | 'gone'

export class RelayedChild implements ChannelChild {
  readonly id: string
  /** Settles when the child left the node: the job that brought it is done. */
  readonly done: Promise<void>
  readonly #host: HostEnd
  #thread: RunnerChannel
  readonly #graceMs: number
  readonly #placeAgain: PlaceAgain
  #phase: Phase = 'placed'
  #published = false
  #grace: NodeJS.Timeout | undefined
  /** While held: aborted when the child leaves before a thread had room for it. */
  #placing: AbortController | undefined
  #left!: () => void

  constructor(create: CreateMessage, host: HostEnd, thread: RunnerChannel, graceMs: number, placeAgain: PlaceAgain) {
    this.id = create.child
    this.#host = host
    this.#thread = thread
    this.#graceMs = graceMs
    this.#placeAgain = placeAgain
    this.done = new Promise((resolve) => (this.#left = resolve))
    thread.adopt(this)
    thread.send(create)
  }

  /** Off any thread, waiting for the host's word after its thread went. */
  get held(): boolean {
    return this.#phase === 'held'
  }

  get busy(): boolean {
    return this.#phase === 'placed' && this.#published && this.#grace === undefined
  }

  /** From the thread: passed on; a final one frees the slot. */
  receive(message: Extract<RunnerMessage, { child: string }>): void {
    if (this.#phase !== 'placed') return
    // A thread says `ready` (with its module's hooks) before it says `created` of any child: the host hears them first.
    if (message.type === 'created') this.#host.ready(this.#thread.hooks)
    this.#host.send(this.#forHost(message))
    if (FINAL.has(message.type)) this.#leave(false)
  }

  /** What the host is sent of a thread's message: as it is, but for the two the node amends. */
  #forHost(message: Extract<RunnerMessage, { child: string }>): RunnerMessage {
    if (message.type === 'rpc/call') return withModuleTools(message, this.#thread.moduleTools)
    if (message.type === 'create-failed') return notNodeFull(message)
    return message
  }

  /** From the host. */
  fromHost(message: Extract<HostMessage, { child: string }>): void {
    if (this.#phase === 'gone') return
    if (message.type === 'drop') {
      this.#host.send({ type: 'dropped', child: this.id })
      return this.#leave(true)
    }
    // Held, only the host's rebuild matters: whatever it sent before it heard of the thread's end was for that thread.
    if (this.#phase === 'held') return message.type === 'create' ? this.#rebuild(message) : undefined
    switch (message.type) {
      // A moved child's turn goes on with a continue: it is running as a published one is.
      case 'publish':
      case 'continue':
        this.#published = true
        break
      case 'abort':
        this.#startGrace()
        break
    }
    this.#thread.send(message)
  }

  /** The thread said something malformed about the child: it ends, and the host hears why. */
  broken(what: string): void {
    this.end({ stopReason: 'error', diagnostic: `protocol error: ${what}` })
  }

  /**
   * The thread is gone (or the node lets the child go): the host hears how the child ended.
   * `movable`: for a fault a thread-mate survives, published or not (the host's publish may be on
   * its way: only the host knows where the child is); it is then held for the host's word.
   */
  end(fault: Fault, movable?: Mobility): void {
    if (this.#phase === 'gone') return
    if (this.#phase === 'held' || !movable) {
      this.#host.send({ type: 'ended', child: this.id, ...fault })
      return this.#leave(false)
    }
    this.#host.send({ type: 'ended', child: this.id, ...fault, movable: true })
    clearTimeout(this.#grace)
    this.#grace = undefined
    this.#thread.part(this, false)
    this.#phase = 'held'
  }

  /** The host is gone: nobody to tell, the thread lets the child go. */
  abandon(): void {
    this.#leave(true)
  }

  /** The host rebuilds the child from its copy of the session: on another thread, once one has room. */
  #rebuild(create: CreateMessage): void {
    const placing = new AbortController()
    this.#placing = placing
    this.#placeAgain(placing.signal, (thread) => {
      this.#placing = undefined
      this.#phase = 'placed'
      this.#thread = thread
      thread.adopt(this)
      thread.send(create)
    }).catch((error: unknown) => {
      if (placing.signal.aborted) return
      this.#host.send({ type: 'create-failed', child: this.id, error: toWireError(new Error(`${this.#host.label} could not place the child again: ${messageOf(error)}`)) })
      this.#leave(false)
    })
  }

  #startGrace(): void {
    if (this.#grace || !this.#published) return
    this.#grace = startGrace(this.#thread, this, this.#graceMs, this.#host.label)
  }

  #leave(drop: boolean): void {
    if (this.#phase === 'gone') return
    const placed = this.#phase === 'placed'
    this.#phase = 'gone'
    clearTimeout(this.#grace)
    this.#placing?.abort()
    if (placed) this.#thread.part(this, drop)
    this.#host.forget(this)
    this.#left()
  }
}

/**
 * A thread's failed build, with the code only the node gives dropped: the host queues again a
 * child refused with it, which must mean none of it ran, and module code may have run here.
 */
function notNodeFull(failed: Extract<RunnerMessage, { type: 'create-failed' }>): RunnerMessage {
  if (failed.error.code !== 'ERR_SUBAGENT_NODE_FULL') return failed
  const { code: _dropped, ...error } = failed.error
  return { ...failed, error }
}

/** A model call with each module tool it names by index in the thread's table given as its schema; anything else unchanged (the host checks it). */
function withModuleTools(call: Extract<RunnerMessage, { type: 'rpc/call' }>, table: readonly ToolSchema[]): RunnerMessage {
  const tools = call.method === 'model' ? (call.payload as { tools?: unknown } | null)?.tools : undefined
  if (!Array.isArray(tools)) return call
  const schemas = tools.map((tool: unknown) => (typeof tool === 'number' && table[tool]) || tool)
  return { ...call, payload: { ...(call.payload as object), tools: schemas } }
}
