/**
 * The runner: the far side of one channel, hosting every child the host places on it. It knows
 * nothing of threads: whoever starts it gives it a `send(frame)` and feeds it each frame received
 * (the worker-thread and child-process entries beside it; a node's threads are worker threads).
 */
import { loadAgentModule } from '../agent/module-loader.js'
import { toWireError } from '../protocol/shapes/error.js'
import { childOf, PROTOCOL_VERSION, type HostMessage, type RunnerMessage } from '../protocol/messages.js'
import { Outbox } from '../protocol/outbox.js'
import { ProtocolError } from '../protocol/validate.js'
import { isHostFrame } from '../protocol/validators.js'
import { RunnerChild, type ChildHost } from './child.js'
import { flushing } from './flushing.js'
import { FrameTexts } from './texts.js'
import { versionMismatchText } from '../protocol/errors.js'

/** A promise that settles once everything sent is written, or undefined when nothing is pending. */
export type Drained = () => Promise<void> | undefined

export class Runner {
  readonly #children = new Map<string, RunnerChild>()
  readonly #outbox: Outbox<RunnerMessage>
  readonly #texts: FrameTexts
  /** What every child on it needs of it: set once the host welcomed it, and shared by them all. */
  #childHost: ChildHost | undefined
  #stopped = false

  readonly #drained: Drained | undefined

  /**
   * `send` hands a frame to the wire. `drained`, for a wire that writes later (a pipe), says when
   * what was handed over is written: module code runs only then, since it may end the runner.
   */
  constructor(send: (frame: RunnerMessage[]) => void, drained?: Drained) {
    this.#drained = drained
    this.#outbox = new Outbox<RunnerMessage>({
      send,
      ownerOf: childOf,
      unsendable: (message, error) => {
        const child = this.#children.get(childOf(message) ?? '')
        child?.fail(new ProtocolError(`a ${message.type} message could not be sent: ${(error as Error)?.message ?? String(error)}`))
      },
    })
    this.#texts = new FrameTexts(this.#outbox)
    this.#outbox.push({ type: 'hello', v: PROTOCOL_VERSION })
  }

  receive(frame: unknown): void {
    if (this.#stopped) return
    if (!isHostFrame(frame)) return this.#fatal(new ProtocolError(`the host sent a malformed frame: ${isHostFrame.explain(frame, 'frame')}`))
    for (const message of frame) {
      if (this.#stopped) return
      this.#dispatch(message)
    }
  }

  /** A frame arrived that could not be decoded: whatever it carried is lost, so no child here can be trusted to go on. */
  unreadable(error: Error): void {
    this.#fatal(new ProtocolError(`a frame from the host could not be read: ${error.message}`))
  }

  #dispatch(message: HostMessage): void {
    switch (message.type) {
      case 'welcome':
        return this.#welcome(message)
      case 'ping':
        return this.#outbox.push({ type: 'pong', n: message.n })
      case 'bye':
        return // for a node, which holds the children of many hosts: this runner's one host ends it by ending its channel
      case 'create': {
        if (!this.#childHost) return this.#fatal(new ProtocolError('the host asked for a child before it welcomed this runner'))
        if (this.#children.has(message.child)) return this.#fatal(new ProtocolError(`the host created child ${message.child} twice`))
        const child = new RunnerChild(message.child, this.#childHost)
        this.#children.set(message.child, child)
        void child.build(message)
        return
      }
      default:
        // A message for a child that is already gone (it finished, or was dropped) needs nothing.
        this.#children.get(message.child)?.receive(message)
    }
  }

  #welcome({ v, config }: Extract<HostMessage, { type: 'welcome' }>): void {
    if (this.#childHost) return this.#fatal(new ProtocolError('the host welcomed this runner twice'))
    if (v !== PROTOCOL_VERSION) {
      return this.#fatal(new ProtocolError(versionMismatchText('the host', v, 'this runner', PROTOCOL_VERSION)))
    }
    const drained = this.#drained
    const guard = <T>(code: () => T) => this.#outbox.afterSent(drained ? () => drained()?.then(code) ?? code() : code)
    const local = (config.agentModule ? loadAgentModule(config.agentModule) : Promise.resolve({})).then((module) => flushing(module, guard))
    this.#childHost = {
      outbox: this.#outbox,
      texts: this.#texts,
      config,
      local,
      forget: (child: RunnerChild) => {
        if (this.#children.get(child.id) === child) this.#children.delete(child.id)
      },
      fatal: (error: Error) => this.#fatal(error),
    }
    const ready = () => this.#outbox.push({ type: 'ready' })
    // The hooks it has tell the host when a child may be between steps with no module code running.
    // Its tool table lets a model call name the module's tools instead of carrying their schemas.
    local.then((module) => this.#outbox.push({ type: 'ready', hooks: (['beforeStep', 'afterTool'] as const).filter((hook) => module.hooks[hook]), tools: [...module.table.schemas] }), ready)
  }

  /** An uncaught error is about to end the runner: tell the host the cause, with everything queued. */
  crashed(error: unknown): void {
    if (this.#stopped) return
    this.#outbox.push({ type: 'crashed', error: toWireError(error) })
    this.#outbox.flush()
  }

  /** The channel cannot be trusted any more: say why, and stop every child. */
  #fatal(error: Error): void {
    if (this.#stopped) return
    this.#outbox.push({ type: 'fatal', error: toWireError(error) })
    this.#outbox.flush()
    this.#stopped = true
    this.#outbox.close()
    for (const child of [...this.#children.values()]) child.fail(error)
    this.#children.clear()
  }
}
