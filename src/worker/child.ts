/**
 * One child on a runner: built inside the creation transaction, run for its one turn once
 * published, its events queued for the host as they are recorded (one message per frame, its
 * streamed text chunks side by side with the other children's in the frame's texts; a host
 * model's deltas excepted, which the host recorded as it sent them), its host calls made over
 * the RPC. It lets go of itself when its turn is over (`idle`), or when the host drops it before
 * it ran.
 */
import { composeChild, type ComposedChild } from '../agent/child.js'
import type { AgentEnvironment } from '../agent/loop.js'
import type { Model } from '../agent/models/model.js'
import type { AgentView } from '../agent/view.js'
import type { LimitReason } from '../agent/limit-stop.js'
import { toWireError } from '../protocol/shapes/error.js'
import { toWire, type HostMessage, type RunnerConfig, type RunnerMessage } from '../protocol/messages.js'
import type { Sink } from '../protocol/outbox.js'
import { RpcClient } from '../protocol/rpc.js'
import type { SessionEvent } from '../protocol/shapes/session.js'
import { ProtocolError } from '../protocol/validate.js'
import { toolSourceOf } from '../agent/tools/tools.js'
import type { LocalModule } from './flushing.js'
import { remoteModel, remoteTool } from './remote.js'
import type { FrameTexts } from './texts.js'

type Create = Extract<HostMessage, { type: 'create' }>
type EventsMessage = Extract<RunnerMessage, { type: 'events' }>
type IdleMessage = Extract<RunnerMessage, { type: 'idle' }>

/** What a child needs of the runner that hosts it. */
export interface ChildHost {
  readonly outbox: Sink<RunnerMessage>
  /** This frame's text chunks of every child on the runner (see texts.ts). */
  readonly texts: FrameTexts
  readonly config: RunnerConfig
  /** The agent module's models, tools and hooks, guarded (see flushing.ts); rejects if it failed to load. */
  readonly local: Promise<LocalModule>
  forget(child: RunnerChild): void
  /** The host broke the protocol: the runner cannot trust the channel any more. */
  fatal(error: Error): void
}

type State = 'building' | 'built' | 'running' | 'closed'

/** What of a child a frame (the outbox's epoch) holds last. */
interface InFrame {
  epoch: number
  events: EventsMessage | undefined
  texts: boolean
}

export class RunnerChild {
  readonly id: string
  readonly #host: ChildHost
  readonly #rpc: RpcClient
  #state: State = 'building'
  #composed: ComposedChild | undefined
  /** The types of the next events, which the host recorded itself (a publish: the turn's start and prompt). */
  #hostRecorded: SessionEvent['type'][] = []
  /** Its model is the host's: the host records its text deltas as they stream, so they are not sent back. */
  #hostModel = false
  /** Its module model was asked for a step that has recorded nothing yet: the host hears of it only if the turn ends first. */
  #unanswered = false
  /** A limit the host found spent as its model's step ended: the child stops as it records the step, as an inline child does. */
  #stopAtRecord: LimitReason | undefined
  /**
   * What of this child the current frame holds last: its events message, still open for more
   * events; its chunks in the frame's texts, which may take more; or another message, which no
   * later event may pass.
   */
  #last: InFrame | undefined

  constructor(id: string, host: ChildHost) {
    this.id = id
    this.#host = host
    const outbox = host.outbox
    // Calls go out in order with the events: an open events message must not swallow later events.
    this.#rpc = new RpcClient(id, { push: (message) => (message.type === 'rpc/call' ? this.#sendWithEvents(message) : this.#send(message)), get epoch() { return outbox.epoch } })
  }

  async build(create: Create): Promise<void> {
    try {
      const local = await this.#host.local
      if (this.#state === 'closed') return // dropped while the module was loading
      const { spec } = create
      // Tools and hooks here see a plain view of the child, never the runtime itself.
      const view: AgentView = { id: spec.id, options: spec.options, session: { header: spec.header, events: [] } }
      this.#hostModel = create.hostModels.includes(spec.options.provider ?? '')
      const composed = composeChild(spec, this.#environment(create, local), view)
      view.session.events = composed.agent.session.events
      composed.agent.session.onAppend((event) => this.#record(event))
      this.#composed = composed
      this.#state = 'built'
      this.#send({ type: 'created', child: this.id })
    } catch (error) {
      if (this.#state === 'closed') return
      this.#send({ type: 'create-failed', child: this.id, error: toWireError(error) })
      this.#close()
    }
  }

  receive(message: Exclude<HostMessage, { type: 'welcome' | 'create' | 'ping' | 'bye' }>): void {
    switch (message.type) {
      case 'publish':
        if (this.#state !== 'built') return this.#host.fatal(new ProtocolError(`the host published child ${this.id} while it was ${this.#state}`))
        // The host records the turn's start and its prompt as it publishes: they are not sent back.
        this.#hostRecorded = ['turn/start', 'user/message']
        return this.#run((agent) => agent.followup(message.prompt, { kind: 'parent' }))
      case 'continue':
        if (this.#state !== 'built') return this.#host.fatal(new ProtocolError(`the host continued child ${this.id} while it was ${this.#state}`))
        return this.#run((agent) => agent.resume(message.concluded))
      case 'abort':
        this.#composed?.agent.cancel(message.reason)
        return
      case 'notify':
        this.#composed?.agent.notify(message.text, message.source)
        return
      case 'drop':
        // Also for a running child the host gave up on (it broke the protocol): stop it, say so.
        this.#send({ type: 'dropped', child: this.id })
        return this.#close()
      default:
        this.#rpc.receive(message)
    }
  }

  /** A message of this child could not be sent: its record is broken, so it stops here. */
  fail(error: unknown): void {
    if (this.#state === 'closed') return
    this.#send({ type: 'failed', child: this.id, error: toWireError(error) })
    this.#close()
  }

  /**
   * What the child's loop runs with. Only its host models and host tools are its own (stand-ins
   * calling the host over its RPC), made as the loop asks for them; the module's models and tools
   * are the runner's, shared by every child on it.
   */
  #environment(create: Create, local: LocalModule): AgentEnvironment {
    const { hostModels } = create
    const record = (text: string) => this.#composed?.agent.session.append('assistant/chunk', { chunk: { type: 'text-delta', text } })
    let remote: Map<string, Model> | undefined
    const models = {
      get: (name: string): Model | undefined => {
        if (!hostModels.includes(name)) return Object.hasOwn(local.models, name) ? local.models[name] : undefined
        remote ??= new Map()
        let model = remote.get(name)
        if (!model) remote.set(name, (model = remoteModel(this.#rpc, name, local.table, record, (limit) => void (this.#stopAtRecord = limit))))
        return model
      },
    }
    const tools = create.hostTools.length === 0 ? local.toolSource : toolSourceOf(create.hostTools.map((descriptor) => remoteTool(this.#rpc, descriptor)), local.tools)
    // Told of module models' requests only (the host serves its own): see #record.
    const requested = () => void (this.#unanswered = true)
    const env: AgentEnvironment = { models, tools, hooks: local.hooks, maxParallelToolCalls: this.#host.config.maxParallelToolCalls, delegated: true, requested }
    // A host model's step comes with the host's verdict (its call's end); a module model's tokens
    // the host counts only from the step's record, against budgets above the child this runner
    // never sees spent: with a token budget in force, its calls wait for the host's word.
    if (!this.#hostModel && create.spec.header.limits?.maxTotalTokens !== undefined) env.admitCalls = (signal) => this.#stepVerdict(signal)
    return env
  }

  /** The host's word on the step just recorded: the call goes out behind the step's record, which the host counts first. */
  async #stepVerdict(signal: AbortSignal): Promise<LimitReason | undefined> {
    const verdict = await this.#rpc.call('step', {}, { signal })
    return verdict?.limit
  }

  /** `start` begins its turn (a published child) or goes on with it (a moved one). */
  #run(start: (agent: ComposedChild['agent']) => void): void {
    this.#state = 'running'
    const { agent, structured } = this.#composed!
    start(agent)
    void agent.whenIdle().then(() => {
      if (this.#state === 'closed') return
      const idle: IdleMessage = { type: 'idle', child: this.id }
      if (structured?.captured) idle.structured = { value: structured.value }
      this.#sendWithEvents(idle)
      this.#close()
    })
  }

  #record(event: SessionEvent): void {
    if (this.#state === 'closed') return
    if (this.#unanswered) this.#answered(event)
    if (this.#hostRecorded.length > 0) {
      const expected = this.#hostRecorded.shift()
      if (event.type !== expected) this.fail(new Error(`the child recorded '${event.type}' where the host records '${expected}' for its publish`))
      return
    }
    if (this.#hostModel && event.type === 'assistant/chunk') return
    const wire = toWire(event)
    const last = this.#lastInFrame()
    if (last?.events) {
      last.events.events.push(wire)
      return this.#stopAt(event)
    }
    const { epoch } = this.#host.outbox
    if (typeof wire === 'string' && (!last || last.texts)) {
      this.#host.texts.add(this.id, wire)
      this.#last = { epoch, events: undefined, texts: true }
      return
    }
    const message: EventsMessage = { type: 'events', child: this.id, events: [wire] }
    this.#host.outbox.push(message)
    this.#last = { epoch, events: message, texts: false }
    this.#stopAt(event)
  }

  /** A module model's request recorded its first output, or the turn ends before any: the host hears of the request then. */
  #answered(event: SessionEvent): void {
    if (event.type === 'assistant/chunk' || event.type === 'assistant/message') this.#unanswered = false
    else if (event.type === 'turn/end') {
      this.#unanswered = false
      this.#send({ type: 'requested', child: this.id })
    }
  }

  /** The step the host's limit verdict came with is recorded: the turn stops now, before any of its calls runs. */
  #stopAt(event: SessionEvent): void {
    const limit = this.#stopAtRecord
    if (limit === undefined || event.type !== 'assistant/message') return
    this.#stopAtRecord = undefined
    this.#composed?.agent.cancel(limit)
  }

  /** What of this child the current frame holds last, if it holds anything of it. */
  #lastInFrame(): InFrame | undefined {
    return this.#last?.epoch === this.#host.outbox.epoch ? this.#last : undefined
  }

  /**
   * Sends a message (a call, the turn's `idle`) that takes the events recorded before it when they
   * are still open in this frame: one message, not two, in the events' place (the order holds per
   * child, which is all a frame keeps).
   */
  #sendWithEvents(message: Extract<RunnerMessage, { type: 'rpc/call' | 'idle' }>): void {
    const events = this.#lastInFrame()?.events
    if (!events || this.#state === 'closed') return this.#send(message)
    Object.assign(events, message)
    this.#last = { epoch: this.#host.outbox.epoch, events: undefined, texts: false }
  }

  #send(message: RunnerMessage): void {
    if (this.#state === 'closed') return
    this.#last = { epoch: this.#host.outbox.epoch, events: undefined, texts: false }
    this.#host.outbox.push(message)
  }

  #close(): void {
    if (this.#state === 'closed') return
    this.#state = 'closed'
    this.#composed?.agent.cancel({ kind: 'disposed' })
    this.#rpc.close('the host let go of the child')
    this.#host.forget(this)
  }
}
