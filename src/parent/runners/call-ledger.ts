/**
 * The host calls of one child that outlive the runner it runs on (CONTRACT.md §8, thread-mates
 * survive). It tells the host where the child is: a host-placed model request in flight, a host
 * tool running or done. A host tool runs once, keyed by the call's id within the step: when the
 * child is moved and its new runner calls the same tool again, it is given the first run's
 * result, never a second run. A model may give two calls of a step one id: each is a run of its
 * own, in the order they came (calls start in the model's order), and a moved child's calls of
 * that id follow them in the same order. A tool's run is tied to the call that follows it, so a runner
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
  /** The runs of the current step by call id, in the order their calls came; their results are recorded in that order. */
  readonly #tools = new Map<string, ToolRun[]>()
  /** Every run not done yet, its result recorded or not (a runner records a cancelled call's at once). */
  readonly #going = new Set<ToolRun>()

  /** The runs of the current step's calls of `callId` whose results are not recorded yet, in call order. */
  runsOf(callId: string): readonly ToolRun[] {
    return this.#tools.get(callId) ?? []
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
    const runs = this.#tools.get(callId) ?? []
    // A run nobody follows was detached by a move: this is its call again. One still followed is another call's.
    let run = runs.find((r) => r.unfollow === undefined)
    if (run && run.name !== name) throw new ProtocolError(`tool call ${callId} is a call of "${run.name}", not "${name}"`)
    if (!run) {
      const controller = new AbortController()
      const reply = execute(controller.signal)
      const started: ToolRun = { name, reply, done: false, controller, unfollow: undefined }
      this.#going.add(started)
      const done = () => {
        started.done = true
        this.#going.delete(started)
      }
      reply.then(
        (value) => {
          done()
          if (value.concluded) this.concluded = true
        },
        done,
      )
      runs.push((run = started))
      this.#tools.set(callId, runs)
    }
    return this.#follow(run, signal)
  }

  /** A step's result was recorded: the first run of its id is over. */
  recorded(callId: string): void {
    const runs = this.#tools.get(callId)
    runs?.shift()
    if (runs?.length === 0) this.#tools.delete(callId)
  }

  /** A new step began: call ids may be reused from here on. */
  stepped(): void {
    this.#tools.clear()
    this.concluded = false
  }

  /** The child is moving: every run goes on, unfollowed, until the new runner calls it again. */
  detach(): void {
    for (const runs of this.#tools.values()) {
      for (const run of runs) {
        run.unfollow?.()
        run.unfollow = undefined
      }
    }
  }

  /** The child ended: every run still going is cancelled. Resolves once they stopped, if any was going. */
  close(reason: unknown): Promise<unknown> | undefined {
    this.detach()
    this.#tools.clear()
    if (this.#going.size === 0) return undefined
    const going = [...this.#going]
    for (const run of going) run.controller.abort(reason)
    return Promise.allSettled(going.map((run) => run.reply))
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
