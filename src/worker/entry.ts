/**
 * The worker entry piscina runs, one task per child. It builds the child inside the creation
 * transaction, runs its loop, streams its events back in batches and answers cancel
 * cooperatively. The task ends when the child can no longer use the thread (rolled back, run
 * finished, or disposed before running), so a finished child never holds a pool slot.
 */
import { threadId, type MessagePort } from 'node:worker_threads'
import { composeChild, type ChildSpec } from '../agent/child.js'
import type { AgentEnvironment } from '../agent/loop.js'
import type { Model } from '../agent/model.js'
import type { AgentModule } from '../agent/module.js'
import type { ToolDefinition } from '../agent/tools.js'
import { PROTOCOL_VERSION, toWireError, type ChildMessage, type CreateRequest, type HostMessage } from '../protocol/lifecycle.js'
import { RpcClient } from '../protocol/rpc.js'
import type { SessionEvent } from '../protocol/session.js'
import { ProtocolError } from '../protocol/validate.js'
import { isCreateRequest, isHostMessage } from '../protocol/validators.js'
import { loadAgentModule } from '../agent/module-loader.js'
import { remoteModel, remoteTool } from './remote.js'

export interface ChildTask {
  request: CreateRequest
  port: MessagePort
}

export default function hostChild(task: ChildTask): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const { port } = task
    const post = (message: ChildMessage) => port.postMessage(message)
    if (!isCreateRequest(task.request) || task.request.v !== PROTOCOL_VERSION) {
      const error = new ProtocolError(`malformed create request (protocol v${PROTOCOL_VERSION} expected)`)
      post({ type: 'create-failed', error: toWireError(error) })
      port.close()
      return resolve()
    }
    new WorkerChild(task.request, port, post, resolve, reject).start()
  })
}

class WorkerChild {
  readonly #request: CreateRequest
  readonly #port: MessagePort
  readonly #post: (message: ChildMessage) => void
  readonly #end: () => void
  readonly #fail: (error: Error) => void
  readonly #rpc: RpcClient
  #pending: SessionEvent[] = []
  #composed: ReturnType<typeof composeChild> | undefined
  #running = false
  #closed = false

  constructor(request: CreateRequest, port: MessagePort, post: (m: ChildMessage) => void, end: () => void, fail: (e: Error) => void) {
    this.#request = request
    this.#port = port
    this.#post = post
    this.#end = end
    this.#fail = fail
    this.#rpc = new RpcClient((message) => {
      this.#flush()
      post(message)
    })
    port.on('message', (message: unknown) => this.#receive(message))
    // The host let go of this child (disposed, rolled back, or gave up on it): stop everything.
    port.on('close', () => {
      this.#closed = true
      this.#rpc.close(new Error('the host closed the channel'))
      this.#composed?.agent.cancel({ kind: 'disposed' })
      this.#end()
    })
  }

  async start(): Promise<void> {
    try {
      const module = this.#request.agentModule ? await loadAgentModule(this.#request.agentModule) : {}
      if (this.#closed) return // rolled back while the module was loading
      const composed = composeChild(this.#request.spec as ChildSpec, this.#environment(module), this.#request.persona)
      composed.agent.session.onAppend((event) => this.#append(event))
      this.#composed = composed
      this.#post({ type: 'created', threadId })
    } catch (error) {
      this.#post({ type: 'create-failed', error: toWireError(error) })
      this.#close()
    }
  }

  #environment(module: AgentModule): AgentEnvironment {
    const models = new Map<string, Model>(Object.entries(module.models ?? {}))
    for (const name of this.#request.hostModels) models.set(name, remoteModel(this.#rpc, name))
    // Host tools first, then module tools: the same order the host itself lists them in.
    const tools = new Map<string, ToolDefinition>()
    for (const descriptor of this.#request.hostTools) tools.set(descriptor.name, remoteTool(this.#rpc, descriptor))
    for (const tool of module.tools ?? []) tools.set(tool.name, tool)
    return {
      models,
      tools: { get: (name) => tools.get(name), list: () => tools.values() },
      hooks: module.hooks ?? {},
      maxParallelToolCalls: this.#request.maxParallelToolCalls,
      delegated: true,
    }
  }

  #receive(message: unknown): void {
    if (!isHostMessage(message)) {
      this.#composed?.agent.cancel({ kind: 'protocol-error' })
      this.#close()
      this.#fail(new ProtocolError(`the child's worker received a malformed message: ${JSON.stringify(message)?.slice(0, 200)}`))
      return
    }
    const msg = message as HostMessage
    const agent = this.#composed?.agent
    switch (msg.type) {
      case 'publish':
        return
      case 'run':
        if (!agent || this.#running) return
        this.#running = true
        agent.followup(msg.prompt, { kind: 'parent' })
        void agent.whenIdle().then(() => {
          const structured = this.#composed?.structured
          this.#flush()
          this.#post(structured?.captured ? { type: 'idle', structured: { value: structured.value } } : { type: 'idle' })
          this.#end()
        })
        return
      case 'abort':
        agent?.cancel(msg.reason)
        return
      case 'rollback':
      case 'dispose':
        agent?.cancel({ kind: 'disposed' })
        this.#close()
        return
      default:
        this.#rpc.receive(msg)
    }
  }

  #append(event: SessionEvent): void {
    // Flushed at the end of the current microtask burst: batched, yet sent before any user code
    // (a tool, a hook, a model) gets the chance to take the thread down.
    if (this.#pending.push(event) === 1) queueMicrotask(() => this.#flush())
  }

  #flush(): void {
    if (this.#pending.length === 0) return
    const events = this.#pending
    this.#pending = []
    this.#post({ type: 'events', events })
  }

  #close(): void {
    if (this.#closed) return
    this.#closed = true
    this.#flush()
    this.#rpc.close(new Error('the child was disposed'))
    this.#port.close()
    this.#end()
  }
}
