/**
 * The host calls of one child that outlive the runner it runs on (CONTRACT.md §8, thread-mates
 * survive). It tells the host where the child is: a host-placed model request in flight, a host
 * tool running or done. A host tool runs once, keyed by the call's id within the step: when the
 * child is moved and its new runner calls the same tool again, it is given the first run's
 * result, never a second run. A tool's run is tied to the call that follows it, so a runner
 * that cancels the call cancels the tool; a move detaches it instead, and the tool goes on.
 */
import type { ToolReply } from '../../protocol/rpc.js'
import { ProtocolError } from '../../protocol/validate.js'

/** One host tool run of the current step. */
export interface ToolRun {
  readonly name: string
  readonly reply: Promise<ToolReply>
  /** Its reply is in: a move may carry it without the tool running again. */
  done: boolean
  readonly controller: AbortController
  /** Stops following the runner call it serves (a move, or the call ended). */
  unfollow: (() => void) | undefined
}

export class CallLedger {
  /** Host-placed model requests in flight. */
  models = 0
  /** A host tool of the current step concluded the turn. */
  concluded = false
  readonly #tools = new Map<string, ToolRun>()

  get tools(): ReadonlyMap<string, ToolRun> {
    return this.#tools
  }

  /** Counts one model request while it runs. */
  async model<T>(request: () => Promise<T>): Promise<T> {
    this.models++
    try {
      return await request()
    } finally {
      this.models--
    }
  }

  /**
   * Serves a host tool call: a run this step already has for `callId` (made before a move) is
   * followed, else `execute` starts one. `signal` is the runner call's: aborting it cancels the run.
   */
  tool(name: string, callId: string, signal: AbortSignal, execute: (signal: AbortSignal) => Promise<ToolReply>): Promise<ToolReply> {
    let run = this.#tools.get(callId)
    if (run && run.name !== name) throw new ProtocolError(`tool call ${callId} is a call of "${run.name}", not "${name}"`)
    if (!run) {
      const controller = new AbortController()
      const reply = execute(controller.signal)
      const started: ToolRun = { name, reply, done: false, controller, unfollow: undefined }
      reply.then(
        (value) => {
          started.done = true
          if (value.concluded) this.concluded = true
        },
        () => void (started.done = true),
      )
      this.#tools.set(callId, (run = started))
    }
    return this.#follow(run, signal)
  }

  /** A step's result was recorded: its run is over. */
  recorded(callId: string): void {
    this.#tools.delete(callId)
  }

  /** A new step began: call ids may be reused from here on. */
  stepped(): void {
    this.#tools.clear()
    this.concluded = false
  }

  /** The child is moving: every run goes on, unfollowed, until the new runner calls it again. */
  detach(): void {
    for (const run of this.#tools.values()) {
      run.unfollow?.()
      run.unfollow = undefined
    }
  }

  /** The child ended: every run still going is cancelled. */
  close(reason: unknown): void {
    this.detach()
    for (const run of this.#tools.values()) run.controller.abort(reason)
    this.#tools.clear()
  }

  #follow(run: ToolRun, signal: AbortSignal): Promise<ToolReply> {
    run.unfollow?.()
    const onAbort = () => run.controller.abort(signal.reason)
    if (signal.aborted) onAbort()
    else signal.addEventListener('abort', onAbort, { once: true })
    const unfollow = () => signal.removeEventListener('abort', onAbort)
    run.unfollow = unfollow
    return run.reply.finally(() => {
      if (run.unfollow === unfollow) unfollow()
    })
  }
}
