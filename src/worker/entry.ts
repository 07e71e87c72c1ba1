/**
 * The worker entry piscina runs, one task per child. It builds the child inside the creation
 * transaction, runs its loop, streams its events back in batches and answers cancel
 * cooperatively. The task ends when the child can no longer use the thread (rolled back, run
 * finished, or released before running), so a finished child never holds a pool slot.
 */
import { threadId, type MessagePort } from 'node:worker_threads'
import { composeChild } from '../agent/child.js'
import type { AgentEnvironment } from '../agent/loop.js'
import type { Model } from '../agent/model.js'
import type { AgentModule } from '../agent/module.js'
import { loadAgentModule } from '../agent/module-loader.js'
import type { ToolDefinition } from '../agent/tools.js'
import { describeShape, PROTOCOL_VERSION, toWireError, type ChildMessage, type CreateRequest, type HostMessage } from '../protocol/lifecycle.js'
import { RpcClient } from '../protocol/rpc.js'
import type { SessionEvent } from '../protocol/session.js'
import { ProtocolError } from '../protocol/validate.js'
import { isCreateRequest, isHostMessage } from '../protocol/validators.js'
import { flushing } from './flushing.js'
import { remoteModel, remoteTool } from './remote.js'

export interface ChildTask {
  request: CreateRequest
  port: MessagePort
}

export default function hostChild(task: ChildTask): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const { port } = task
    try {
      isCreateRequest.assert(task.request, 'create request')
      if (task.request.v !== PROTOCOL_VERSION) throw new ProtocolError(`create request speaks protocol v${task.request.v}; this worker speaks v${PROTOCOL_VERSION}`)
    } catch (error) {
      port.postMessage({ type: 'create-failed', error: toWireError(error) } satisfies ChildMessage)
      port.close()
      return resolve()
    }
    new WorkerChild(task.request, port, resolve, reject).start()
  })
}

type Composed = ReturnType<typeof composeChild>

class WorkerChild {
  readonly #request: CreateRequest
  readonly #port: MessagePort
  readonly #end: () => void
  readonly #fail: (error: Error) => void
  readonly #rpc: RpcClient
  #pending: SessionEvent[] = []
  #composed: Composed | undefined
  #running = false
  #closed = false

  constructor(request: CreateRequest, port: MessagePort, end: () => void, fail: (error: Error) => void) {
    this.#request = request
    this.#port = port
    this.#end = end
    this.#fail = fail
    this.#rpc = new RpcClient((message) => {
      this.#flush()
      this.#post(message)
    })
    port.on('message', (message: unknown) => this.#receive(message))
    // The host let go of this child (released, rolled back, or gave up on it): stop everything.
    port.on('close', () => this.#close())
  }

  async start(): Promise<void> {
    try {
      const module = this.#request.agentModule ? await loadAgentModule(this.#request.agentModule) : {}
      if (this.#closed) return // rolled back while the module was loading
      const { spec, persona } = this.#request
      // Tools and hooks here see a plain view of the child, never the runtime itself.
      const session = { header: spec.header, events: [] as SessionEvent[] }
      const composed = composeChild(spec, this.#environment(module), persona, { id: spec.id, options: spec.options, session })
      session.events = composed.agent.session.events
      composed.agent.session.onAppend((event) => this.#append(event))
      this.#composed = composed
      this.#post({ type: 'created', threadId })
    } catch (error) {
      this.#post({ type: 'create-failed', error: toWireError(error) })
      this.#close()
    }
  }

  #environment(module: AgentModule): AgentEnvironment {
    // Module code runs on this thread and may take it down (exit, spin, crash): whatever the child
    // recorded is sent before any of it runs. Host models and tools flush as their call is posted.
    const local = flushing(module, () => this.#flush())
    const models = new Map<string, Model>(Object.entries(local.models))
    for (const name of this.#request.hostModels) models.set(name, remoteModel(this.#rpc, name))
    // Host tools first, then module tools: the same order the host itself lists them in.
    const tools = new Map<string, ToolDefinition>()
    for (const descriptor of this.#request.hostTools) tools.set(descriptor.name, remoteTool(this.#rpc, descriptor))
    for (const tool of local.tools) tools.set(tool.name, tool)
    return {
      models,
      tools: { get: (name) => tools.get(name), list: () => tools.values() },
      hooks: local.hooks,
      maxParallelToolCalls: this.#request.maxParallelToolCalls,
      delegated: true,
    }
  }

  #receive(raw: unknown): void {
    const message = raw as HostMessage
    if (!isHostMessage(raw) || (message.type === 'publish' && (!this.#composed || this.#running))) {
      this.#abandon(new ProtocolError(`the child's worker received ${isHostMessage(raw) ? 'a run it cannot start' : 'a malformed message'} ${describeShape(raw)}`))
      return
    }
    const agent = this.#composed?.agent
    switch (message.type) {
      case 'publish':
        this.#running = true
        agent!.followup(message.prompt, { kind: 'parent' })
        void agent!.whenIdle().then(() => this.#idle())
        return
      case 'abort':
        agent?.cancel(message.reason)
        return
      case 'rollback':
      case 'dispose':
        this.#close()
        return
      default:
        this.#rpc.receive(message)
    }
  }

  /** The one-shot child is done: its last events ride with `idle`, then the channel closes. */
  #idle(): void {
    const structured = this.#composed?.structured
    const message: ChildMessage = { type: 'idle' }
    if (this.#pending.length > 0) message.events = this.#take()
    if (structured?.captured) message.structured = { value: structured.value }
    this.#post(message)
    this.#close()
  }

  #append(event: SessionEvent): void {
    // Flushed at the end of the current microtask burst: batched, yet sent before any user code
    // (a tool, a hook, a model) gets the chance to take the thread down.
    if (this.#pending.push(event) === 1) queueMicrotask(() => this.#flush())
  }

  #flush(): void {
    if (this.#pending.length > 0) this.#post({ type: 'events', events: this.#take() })
  }

  #take(): SessionEvent[] {
    const events = this.#pending
    this.#pending = []
    return events
  }

  #post(message: ChildMessage): void {
    if (this.#closed) return
    try {
      this.#port.postMessage(message)
    } catch (error) {
      // The loop only records plain data, so this is a bug; fail this child, not the thread.
      this.#abandon(new ProtocolError(`a ${message.type} message could not be sent: ${(error as Error).message}`))
    }
  }

  /** Ends this child with an error the host will see as the task's failure. */
  #abandon(error: Error): void {
    this.#fail(error)
    this.#close()
  }

  #close(): void {
    if (this.#closed) return
    this.#closed = true
    this.#composed?.agent.cancel({ kind: 'disposed' })
    this.#rpc.close(new Error('the host let go of the child'))
    this.#port.close()
    this.#end()
  }
}
