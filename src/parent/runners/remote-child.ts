/**
 * The host's handle on one child that runs on a runner, whatever carries its channel (a worker
 * thread, a child process, a remote node): one explicit state machine, one way out. Every path that ends the child (its turn finished, its creation
 * failed, the host let it go, it broke the protocol, its runner died) goes through `#settle`,
 * once, which resolves `run()`, rejects a pending creation, closes its host calls and gives its
 * slot back. Nothing it receives is trusted: each message is checked against the phase it
 * arrives in, and each event against the sequence.
 *
 * A running child whose runner went (a sibling was stopped, a crash, the heap limit, silence) is
 * moved when the host knows no module code of it was running (move-point.ts): it records
 * `child/moved`, waits for a slot on another runner, is rebuilt there from the host's copy of
 * its session and goes on with its turn, at most MAX_MOVES times.
 *
 *   creating ──created──▶ created ──run──▶ running ──idle──▶ ended
 *       │                    │              │   ▲
 *       │                    │   runner gone│   │created
 *       │                    │              ▼   │
 *       │                    │           placing ──slot──▶ rebuilding
 *       └──── create-failed, let go, runner gone, protocol error, cancel while moving ──▶ ended
 */
import { isDeepStrictEqual } from 'node:util'
import { asLimitReason } from '../../agent/limit-stop.js'
import { argumentValidator } from '../../agent/tools/schema.js'
import { STRUCTURED_OUTPUT_TOOL } from '../../agent/tools/structured.js'
import type { ToolDefinition } from '../../agent/tools/tools.js'
import type { ChildSpec, RemoteToolDescriptor } from '../../protocol/shapes/child.js'
import type { ContentBlock } from '../../protocol/shapes/content.js'
import type { TurnEndReason } from '../../protocol/shapes/session.js'
import { fromWireError } from '../../protocol/shapes/error.js'
import { fromWire, type HostMessage, type RunnerMessage, type WireEvent } from '../../protocol/messages.js'
import { take, type Notice } from '../../protocol/shapes/notice.js'
import { RUNNER_BOUNDS } from '../../protocol/bounds.js'
import { RpcServer, type RpcHandlers } from '../../protocol/rpc.js'
import { recordableReason } from '../../protocol/values.js'
import { messageOf, SubagentError, subagentError } from '../../protocol/errors.js'
import type { ChannelChild, Fault, RunnerChannel } from './channel.js'
import { CallLedger } from './call-ledger.js'
import { startGrace } from './grace.js'
import { HostCalls } from './host-calls.js'
import type { ChildOutcome } from '../transport.js'
import type { ChildHandle, ChildMirror } from '../transport.js'
import type { Placement } from '../types.js'
import { movePoint, type Mobility, type MovePoint } from './move-point.js'

const RELEASED: ChildOutcome = { fault: { stopReason: 'aborted', diagnostic: 'the child was released' } }
/** What a host call still running learns when its child ends: the abort reason of its signal. */
const RUNNER_GONE = { kind: 'runner-gone' }

/** The child's runner died before the child was built; nothing of it was the child's doing, so a start may try elsewhere. */
export class RunnerLostError extends SubagentError<'ERR_SUBAGENT_RUNNER_LOST'> {
  override name = 'RunnerLostError'

  constructor(message: string) {
    super('ERR_SUBAGENT_RUNNER_LOST', message)
  }
}

type Phase = 'creating' | 'created' | 'running' | 'placing' | 'rebuilding' | 'ended'

/** How often one child may be moved; the next time its runner goes, it ends `error`. */
export const MAX_MOVES = 3

/** Finds a moved child a slot on another runner: `build` runs with the chosen channel. */
export type Replace = (signal: AbortSignal, build: (channel: RunnerChannel) => void) => Promise<void>

/** How the runner learns that the child ended: it said so itself, it must be told, or it is gone. */
type Parting = 'runner-let-go' | 'drop' | 'runner-gone'

export interface RemoteChildOptions {
  placement: Placement
  /** abortGraceMs: what a cancelled child has to end its turn, and the most its end waits for host tools that ignore their signal. */
  graceMs: number
  /** A runner that enforces the grace itself (a node): the host steps in only this much after it. */
  graceMarginMs?: number
  /** Where a moved child is placed again; without it, a child is never moved. */
  replace?: Replace
}

/** What builds the child on its runner: the spec and the host-placed models and tools it may call (a snapshot). */
function createMessage(spec: ChildSpec, placement: Placement): Extract<HostMessage, { type: 'create' }> {
  return {
    type: 'create',
    child: spec.id,
    spec,
    hostModels: [...placement.models.keys()],
    hostTools: [...placement.tools.values()].map(describeTool),
  }
}

export class RemoteChild implements ChildHandle, ChannelChild {
  readonly id: string
  readonly #spec: ChildSpec
  readonly #mirror: ChildMirror
  #channel: RunnerChannel
  readonly #options: RemoteChildOptions
  readonly #handlers: RpcHandlers
  readonly #ledger = new CallLedger()
  #rpc: RpcServer
  /** Host calls it may have running at once: its loop's bound, however many its runner sends. */
  readonly #maxCalls: number
  /** Its provider is a host-placed model: the host records its text deltas (host-calls.ts), the runner sends none. */
  readonly #hostModel: boolean
  readonly #created = deferred<void>()
  readonly #outcome = deferred<ChildOutcome>()
  #phase: Phase = 'creating'
  /** Set once a cancel was sent: the child then has `graceMs` (and a node's margin) to end its turn. */
  #grace: NodeJS.Timeout | undefined
  /** While moving: how it goes on once rebuilt, and the wait for a slot. */
  #move: { point: MovePoint; placing: AbortController } | undefined
  #moves = 0
  /** Notices that came while it was between runners: its new runner gets them once it goes on. */
  #heldNotices: Notice[] = []
  /** Notices its runner was sent that no step of it took yet: a move hands them to the next runner. */
  #handed: Notice[] = []
  /**
   * The caller's own cancel reason, unchanged: what the host's record keeps (CONTRACT.md §7). The
   * runner gets a recordable copy, which may have lost what a structured clone drops (a
   * DOMException on Node 20, an error's own fields) or be only a description of an uncloneable
   * value; the host's record is in memory and holds anything, as an inline child's does.
   */
  #cancelled: { reason: unknown } | undefined

  constructor(spec: ChildSpec, mirror: ChildMirror, channel: RunnerChannel, options: RemoteChildOptions) {
    this.id = spec.id
    this.#spec = spec
    this.#mirror = mirror
    this.#channel = channel
    this.#options = options
    this.#maxCalls = (channel.config.maxParallelToolCalls ?? 1) + RUNNER_BOUNDS.callsBeyondParallel
    this.#hostModel = options.placement.models.has(spec.options.provider ?? '')
    this.#handlers = new HostCalls({
      view: mirror.view,
      spec,
      placement: options.placement,
      ledger: this.#ledger,
      moduleTools: () => this.#channel.moduleTools,
      recordText: (text) => this.#mirror.append(fromWire(text, this.#mirror.view.session.events.length)),
      requested: () => this.#mirror.requested(),
    })
    this.#rpc = new RpcServer(spec.id, channel.outbox, this.#handlers)
    this.#created.promise.catch(() => {})
    channel.adopt(this)
    channel.send(createMessage(spec, options.placement))
  }

  /**
   * Whether module code of it may be running on its runner (so the runner's silence may be CPU
   * work, not a stuck loop). Not while it waits on the host alone, where a move would take it
   * (CONTRACT.md §8): on its host model, or on host tools holding its step (every call it began
   * is one, still running, and the rest wait on them). Then its loop waits on the host and
   * nothing of the module runs for it, so a silent runner is stuck, and the child moves.
   */
  get busy(): boolean {
    if (this.#phase !== 'running' || this.#grace !== undefined) return false
    return this.#ledger.models === 0 && this.#movePoint('held') === undefined
  }

  /** How often it was rebuilt on another runner. */
  get moves(): number {
    return this.#moves
  }

  /** Resolves once the runner built the child; an abort lets it go first, then rejects with the reason. */
  async created(signal: AbortSignal): Promise<void> {
    const onAbort = () => this.#settle({ fault: { stopReason: 'aborted', diagnostic: 'the start was aborted' } }, 'drop', () => signal.reason)
    if (signal.aborted) onAbort()
    else signal.addEventListener('abort', onAbort, { once: true })
    try {
      await this.#created.promise
    } finally {
      signal.removeEventListener('abort', onAbort)
    }
  }

  async rollback(): Promise<void> {
    this.#letGo()
  }

  run(prompt: ContentBlock[]): Promise<ChildOutcome> {
    if (this.#phase === 'created') {
      this.#phase = 'running'
      this.#channel.send({ type: 'publish', child: this.id, prompt })
      this.#begin(prompt)
    }
    return this.#outcome.promise
  }

  /**
   * What the publish makes the child record at once, before anything of its turn runs (its loop
   * starts the turn as it takes the message): the host records it itself, and the runner does not
   * send it back, so a prompt crosses once.
   */
  #begin(prompt: ContentBlock[]): void {
    const events = this.#mirror.view.session.events
    this.#mirror.append({ seq: events.length, type: 'turn/start', data: {} })
    this.#mirror.append({ seq: events.length, type: 'user/message', data: { content: prompt.map((block) => ({ ...block })), source: { kind: 'parent' } } })
  }

  cancel(reason: unknown): void {
    // A child between runners has no turn running to stop: it ends here.
    if (this.#move) return this.#settle({ fault: { stopReason: 'aborted', diagnostic: 'the child was cancelled while it was being moved to another runner' } }, 'drop')
    if (this.#phase !== 'running' || this.#grace) return
    this.#cancelled = { reason }
    // Its model stream sends nothing after the abort, and what it holds goes before it: every delta
    // the host recorded reaches the runner before the abort does, so both records end the step
    // with the same chunks. The host's model calls stop now, with the caller's own reason.
    this.#rpc.mute('model', reason)
    this.#channel.send({ type: 'abort', child: this.id, reason: recordableReason(reason) })
    this.#grace = startGrace(this.#channel, this, this.#options.graceMs + (this.#options.graceMarginMs ?? 0))
  }

  /**
   * Into the child's inbox on its runner: a built child keeps it for the turn it is about to run,
   * a running one takes it at its next step, one being moved gets it on its new runner.
   */
  notify(notice: Notice): void {
    if (this.#move) this.#heldNotices.push(notice)
    else if (this.#phase === 'created' || this.#phase === 'running') this.#hand(notice)
  }

  #hand(notice: Notice): void {
    this.#handed.push(notice)
    this.#channel.send({ type: 'notify', child: this.id, ...notice })
  }

  async release(): Promise<void> {
    this.#letGo()
  }

  /** A message from the runner about this child. */
  receive(message: Extract<RunnerMessage, { child: string }>): void {
    switch (message.type) {
      case 'created':
        if (this.#phase === 'rebuilding') return this.#resume()
        if (this.#phase !== 'creating') return this.#violation(message.type)
        this.#phase = 'created'
        return this.#created.resolve()
      case 'create-failed':
        if (this.#phase === 'rebuilding') {
          return this.#settle({ fault: { stopReason: 'error', diagnostic: `the child could not be rebuilt on another runner: ${message.error.message}` } }, 'runner-let-go')
        }
        if (this.#phase !== 'creating') return this.#violation(message.type)
        return this.#settle({ fault: { stopReason: 'error', diagnostic: message.error.message } }, 'runner-let-go', () => fromWireError(message.error))
      case 'events':
        if (this.#phase !== 'running') return this.#violation(message.type)
        this.#record(message.events)
        return
      case 'idle':
        if (this.#phase !== 'running') return this.#violation(message.type)
        if (message.events && !this.#record(message.events)) return
        if (message.structured && !this.#validStructured(message.structured.value)) {
          return this.#protocolError('a structured result that does not match the requested outputSchema')
        }
        return this.#settle(message.structured ? { structured: message.structured } : {}, 'runner-let-go')
      case 'failed':
        return this.#settle({ fault: { stopReason: 'error', diagnostic: `the child's runner had to stop it: ${message.error.message}` } }, 'runner-let-go')
      case 'ended': {
        const fault = { stopReason: message.stopReason, diagnostic: message.diagnostic }
        // A node's thread went under it, for a fault its mates survive: the node holds it until the
        // host says (a create rebuilds it on another of the node's threads, a drop lets it go).
        if (message.movable && (this.#phase === 'running' || this.#phase === 'rebuilding')) {
          return this.#lost(fault, 'heard', 'drop', async (_signal, build) => build(this.#channel))
        }
        // Not published yet (or no longer running): it ends, and a node holding it lets it go.
        return this.#settle({ fault }, message.movable ? 'drop' : 'runner-let-go', () => subagentError('ERR_SUBAGENT_CHILD_ENDED', fault.diagnostic))
      }
      case 'rpc/call':
        if (this.#phase !== 'running') return this.#violation(message.type)
        // What the child recorded before the call comes first: the call reads the record up to it.
        if (message.events && !this.#record(message.events)) return
        if (this.#rpc.running >= this.#maxCalls) return this.#overrun()
        return this.#rpc.receive(message)
      case 'rpc/cancel':
        if (this.#phase !== 'running') return this.#violation(message.type)
        return this.#rpc.receive(message)
      case 'requested':
        if (this.#phase !== 'running') return this.#violation(message.type)
        return this.#mirror.requested()
      case 'dropped':
        return this.#violation(message.type)
    }
  }

  /**
   * The runner is gone (crashed, terminated, closed). `movable`: it went for a fault a thread-mate
   * survives (CONTRACT.md §8); the child then moves when no module code of it was running, else
   * whatever it was doing is over.
   */
  end(fault: Fault, movable?: Mobility): void {
    this.#lost(fault, movable, 'runner-gone', this.#options.replace)
  }

  /**
   * Moves the child (at most MAX_MOVES times) when the host's copy says it may, with `replace`;
   * else it ends with `fault`, its runner told as `parting` says.
   */
  #lost(fault: Fault, movable: Mobility | undefined, parting: Parting, replace: Replace | undefined): void {
    const point = movable && replace ? this.#movePoint(movable) : undefined
    if (!point) return this.#settle({ fault }, parting, () => new RunnerLostError(fault.diagnostic))
    if (this.#moves >= MAX_MOVES) {
      const diagnostic = `${fault.diagnostic}; the child was not moved again: it had already been moved to another runner ${MAX_MOVES} times, the most a child may be`
      return this.#settle({ fault: { stopReason: 'error', diagnostic } }, parting)
    }
    this.#moveOff(fault.diagnostic, point, replace!)
  }

  /** The exchange with the runner about this child broke (a malformed message, one that could not be sent). */
  broken(what: string): void {
    this.#settle({ fault: { stopReason: 'error', diagnostic: `protocol error: ${what}` } }, 'drop')
  }

  /** The host lets go of a child that did not (or will not) run: its runner is told to drop it. */
  #letGo(): void {
    this.#settle(RELEASED, 'drop')
  }

  /** Appends events to the mirror, each exactly the next in sequence; false (and the child ended) on a gap or repeat. */
  #record(events: readonly WireEvent[]): boolean {
    for (const item of events) {
      const expected = this.#mirror.view.session.events.length
      const event = fromWire(item, expected)
      if (event.seq !== expected) {
        this.#protocolError(`event ${event.seq} where event ${expected} was due: a gap or a repeat in the child's record`)
        return false
      }
      // Only the host moves a child, so only the host records a move, and its host model's text.
      if (event.type === 'child/moved') {
        this.#protocolError(`a 'child/moved' event, which only the host records`)
        return false
      }
      if (event.type === 'assistant/chunk' && this.#hostModel) {
        this.#protocolError(`an 'assistant/chunk' event of a host model's stream, which only the host records`)
        return false
      }
      if (event.type === 'assistant/message') this.#ledger.stepped()
      else if (event.type === 'tool/result') this.#ledger.recorded(event.data.callId)
      // A step took a notice: a move no longer carries it.
      else if (event.type === 'user/message' && this.#handed.length > 0) take(this.#handed, event.data.source)
      else if (event.type === 'turn/end') this.#callersReason(event.data)
      this.#mirror.append(event)
    }
    return true
  }

  /**
   * A turn the caller's cancel ended records the caller's reason, not the runner's copy of it
   * (which a process pipe encodes again). A runner's loop ends a turn aborted for the signal the
   * host aborted, or at a limit: one it reached itself first keeps its own reason.
   */
  #callersReason(data: { reason: TurnEndReason }): void {
    const cancelled = this.#cancelled
    if (!cancelled || data.reason.kind !== 'aborted') return
    const own = asLimitReason(data.reason.reason)
    if (own && !isDeepStrictEqual(own, asLimitReason(cancelled.reason))) return
    data.reason = { kind: 'aborted', reason: cancelled.reason }
  }

  /** Where the child is, as the host knows it: whether it may move, and how it then goes on. */
  #movePoint(mobility: Mobility): MovePoint | undefined {
    if (this.#phase === 'rebuilding') return this.#move?.point
    if (this.#phase !== 'running' || this.#grace) return undefined
    return movePoint({
      events: this.#mirror.view.session.events,
      from: this.#spec.header.seedLength ?? 0,
      ledger: this.#ledger,
      hostModel: this.#hostModel,
      hooks: this.#channel.hooks,
      maxParallel: this.#channel.config.maxParallelToolCalls ?? 1,
      mobility,
      // The structured-output runtime's tool stages a value on the runner, and is called again there.
      runsNoModuleCode: (name) => name === STRUCTURED_OUTPUT_TOOL && this.#spec.outputSchema !== undefined,
    })
  }

  /** Leaves the dead runner: its model request is dropped (made again), its host tools go on; a slot elsewhere is sought. */
  #moveOff(reason: string, point: MovePoint, replace: Replace): void {
    this.#ledger.detach()
    this.#rpc.close(RUNNER_GONE)
    this.#channel.part(this, false)
    this.#moves++
    // The notices the dead runner held and no step took go to the next runner, before those that come meanwhile.
    this.#heldNotices.unshift(...this.#handed.splice(0))
    const placing = new AbortController()
    this.#move = { point, placing }
    this.#phase = 'placing'
    // Recorded once it is between runners: a listener of this event that cancels it ends it here.
    const events = this.#mirror.view.session.events
    this.#mirror.append({ seq: events.length, type: 'child/moved', data: { reason } })
    if (placing.signal.aborted) return
    replace(placing.signal, (channel) => this.#rebuild(channel)).catch((error: unknown) => {
      if (placing.signal.aborted) return
      this.#settle({ fault: { stopReason: 'error', diagnostic: `${reason}; the child could not be moved to another runner: ${messageOf(error)}` } }, 'runner-gone')
    })
  }

  /** Builds the child on its new runner from the host's copy of its session (fork seed, depth and limits in its header). */
  #rebuild(channel: RunnerChannel): void {
    if (this.#phase !== 'placing') return
    this.#phase = 'rebuilding'
    this.#channel = channel
    this.#rpc = new RpcServer(this.id, channel.outbox, this.#handlers)
    channel.adopt(this)
    const spec: ChildSpec = { ...this.#spec, seed: [...this.#mirror.view.session.events] }
    channel.send(createMessage(spec, this.#options.placement))
  }

  /** Rebuilt: the turn goes on on the new runner. */
  #resume(): void {
    const { point } = this.#move!
    this.#move = undefined
    this.#phase = 'running'
    // Before the turn goes on, so its next step takes them.
    for (const notice of this.#heldNotices.splice(0)) this.#hand(notice)
    this.#channel.send({ type: 'continue', child: this.id, concluded: point.concluded })
  }

  #validStructured(value: unknown): boolean {
    return this.#spec.outputSchema !== undefined && argumentValidator(this.#spec.outputSchema)(value)
  }

  #violation(type: string): void {
    this.#protocolError(`a '${type}' message while the child was ${this.#phase}`)
  }

  /** More host calls at once than its own loop would make: its runner is not to be trusted. */
  #overrun(): void {
    this.#channel.violation(`more host calls for child ${this.id} than may run at once (maxParallelToolCalls + ${RUNNER_BOUNDS.callsBeyondParallel}: ${this.#maxCalls})`)
  }

  #protocolError(what: string): void {
    this.broken(`the ${this.#channel.label} sent ${what}`)
  }

  /** The one way out. `createError` makes what a pending creation rejects with (only then: an Error is not free). */
  #settle(outcome: ChildOutcome, parting: Parting, createError: () => unknown = () => subagentError('ERR_SUBAGENT_CHILD_ENDED', outcome.fault?.diagnostic ?? 'the child ended')): void {
    if (this.#phase === 'ended') return
    const creating = this.#phase === 'creating'
    this.#phase = 'ended'
    clearTimeout(this.#grace)
    this.#move?.placing.abort()
    this.#move = undefined
    this.#rpc.close(RUNNER_GONE)
    const stopping = this.#ledger.close(RUNNER_GONE)
    if (creating) this.#created.reject(createError())
    if (stopping) void this.#endAfter(stopping, outcome)
    else this.#outcome.resolve(outcome)
    this.#channel.part(this, parting === 'drop')
  }

  /**
   * Its host tools were cancelled with it: it ends once they stopped, as an inline child's turn
   * ends after its tools, so a child it was delegating to in the foreground ends (and is let go)
   * before it does. A tool that ignores its signal is waited for at most the grace, on a timer
   * that holds the process: the runner it left may be gone, and a pending result must settle.
   */
  async #endAfter(stopping: Promise<unknown>, outcome: ChildOutcome): Promise<void> {
    let timer: NodeJS.Timeout | undefined
    const graceOver = new Promise<void>((resolve) => (timer = setTimeout(resolve, this.#options.graceMs)))
    await Promise.race([stopping, graceOver])
    clearTimeout(timer)
    this.#outcome.resolve(outcome)
  }
}

function describeTool(tool: ToolDefinition): RemoteToolDescriptor {
  const descriptor: RemoteToolDescriptor = { name: tool.name, description: tool.description, parameters: tool.parameters as Record<string, unknown> }
  if (tool.needsApproval !== undefined) descriptor.needsApproval = tool.needsApproval
  if (tool.concurrencySafe !== undefined) descriptor.concurrencySafe = tool.concurrencySafe
  if (tool.guidance !== undefined) descriptor.guidance = tool.guidance
  return descriptor
}

function deferred<T>() {
  let resolve!: (value: T) => void
  let reject!: (error: unknown) => void
  const promise = new Promise<T>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}
