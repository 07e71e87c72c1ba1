/**
 * A node's handle on one child it took from the queue: it runs on one of the node's threads and
 * is answered for to its host. The node relays, it does not interpret: the thread's messages go
 * to the host as they are, the host's to the thread. What only the node can do, it does here:
 * enforce the grace after an abort (terminating the thread, as the host does on its own threads)
 * and report the end of a thread the child was on (`ended`).
 */
import type { ChannelChild, Fault, RunnerChannel } from '../parent/runners/channel.js'
import { startGrace } from '../parent/runners/grace.js'
import type { HostMessage, RunnerMessage } from '../protocol/messages.js'
import type { CreateMessage } from './envelope.js'

/** The host's end, as a child sees it. */
export interface HostEnd {
  /** Names the node in diagnostics: 'node <id>'. */
  readonly label: string
  send(message: RunnerMessage): void
  forget(child: RelayedChild): void
}

/** The messages that end a child on its thread: the host learns of them and the slot is free. */
const FINAL = new Set<RunnerMessage['type']>(['idle', 'create-failed', 'failed'])

export class RelayedChild implements ChannelChild {
  readonly id: string
  /** Settles when the child left the node: the job that brought it is done. */
  readonly done: Promise<void>
  readonly #host: HostEnd
  readonly #thread: RunnerChannel
  readonly #graceMs: number
  #published = false
  #grace: NodeJS.Timeout | undefined
  #gone = false
  #left!: () => void

  constructor(create: CreateMessage, host: HostEnd, thread: RunnerChannel, graceMs: number) {
    this.id = create.child
    this.#host = host
    this.#thread = thread
    this.#graceMs = graceMs
    this.done = new Promise((resolve) => (this.#left = resolve))
    thread.adopt(this)
    thread.send(create)
  }

  get busy(): boolean {
    return this.#published && this.#grace === undefined
  }

  /** From the thread: passed on; a final one frees the slot. */
  receive(message: Extract<RunnerMessage, { child: string }>): void {
    if (this.#gone) return
    this.#host.send(message)
    if (FINAL.has(message.type)) this.#leave(false)
  }

  /** From the host. */
  fromHost(message: Extract<HostMessage, { child: string }>): void {
    if (this.#gone) return
    switch (message.type) {
      case 'drop':
        this.#host.send({ type: 'dropped', child: this.id })
        return this.#leave(true)
      case 'publish':
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
    this.end({ stopReason: 'error', diagnostic: `protocol error: ${what}` }, true)
  }

  /** The thread is gone (or the node lets the child go): the host hears how the child ended. */
  end(fault: Fault, drop = false): void {
    if (this.#gone) return
    this.#host.send({ type: 'ended', child: this.id, ...fault })
    this.#leave(drop)
  }

  /** The host is gone: nobody to tell, the thread lets the child go. */
  abandon(): void {
    this.#leave(true)
  }

  #startGrace(): void {
    if (this.#grace || !this.#published) return
    this.#grace = startGrace(this.#thread, this, this.#graceMs, this.#host.label)
  }

  #leave(drop: boolean): void {
    if (this.#gone) return
    this.#gone = true
    clearTimeout(this.#grace)
    this.#thread.part(this, drop)
    this.#host.forget(this)
    this.#left()
  }
}
