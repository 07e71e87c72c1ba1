/**
 * The worker transport: each child runs in a pooled worker thread (piscina), one task per child,
 * talking to the host over a MessagePort of its own. The host admits at most
 * `maxThreads × childrenPerWorker` children at once, so piscina never queues a task it cannot
 * start and an abort while waiting for a slot simply leaves the queue.
 */
import { availableParallelism } from 'node:os'
import { MessageChannel } from 'node:worker_threads'
import { Piscina } from 'piscina'
import type { ChildSpec } from '../agent/child.js'
import type { ToolDefinition } from '../agent/tools.js'
import { PROTOCOL_VERSION, type CreateRequest, type RemoteToolDescriptor } from '../protocol/lifecycle.js'
import type { ChildHandle, ChildMirror, Transport } from './transport.js'
import type { Placement, PoolOptions } from './types.js'
import { WorkerChild, type ChildTermination } from './worker-child.js'

export interface WorkerTransportOptions {
  pool: PoolOptions
  abortGraceMs: number
  agentModule: URL | undefined
  persona: string | undefined
  maxParallelToolCalls: number
  /** Host-placed models and tools (they stay in the main thread, reached by RPC), snapshot per child. */
  placement: () => Placement
}

const ENTRY = new URL('../worker/entry.js', import.meta.url)

export class WorkerTransport implements Transport {
  readonly local = false
  readonly #options: WorkerTransportOptions
  readonly #pool: Piscina
  readonly #capacity: number
  readonly #waiting: Array<{ wake(): void; fail(error: Error): void }> = []
  /** Children whose task has ended; a late 'created' must not place them on a thread again. */
  readonly #ended = new WeakSet<WorkerChild>()
  /** Children whose task is still running, by thread: who a termination takes down. */
  readonly #threads = new Map<number, Set<WorkerChild>>()
  #admitted = 0
  #closing = false

  constructor(options: WorkerTransportOptions) {
    this.#options = options
    const { pool } = options
    const cores = availableParallelism()
    const maxThreads = pool.maxThreads ?? Math.max(1, Math.round(cores * 1.5))
    const minThreads = Math.min(maxThreads, pool.minThreads ?? Math.max(1, Math.floor(cores / 2)))
    const childrenPerWorker = pool.childrenPerWorker ?? 1
    this.#capacity = maxThreads * childrenPerWorker
    this.#pool = new Piscina({
      filename: ENTRY.href,
      minThreads,
      maxThreads,
      concurrentTasksPerWorker: childrenPerWorker,
      idleTimeout: pool.idleTimeoutMs ?? 10_000,
      // A worker blocked in Atomics.wait could not hear a finished child's dispose message.
      atomics: 'disabled',
      ...(pool.resourceLimits ? { resourceLimits: pool.resourceLimits } : {}),
    })
    // A worker that dies with no task in flight is reported here; without a listener it would crash the host.
    this.#pool.on('error', (error: Error) => {
      process.emitWarning(`a subagent worker thread failed outside any run: ${error.message}`, { code: 'SUBAGENT_WORKER_ERROR' })
    })
  }

  async create(spec: ChildSpec, mirror: ChildMirror, signal: AbortSignal): Promise<ChildHandle> {
    await this.#admit(signal)
    const { port1, port2 } = new MessageChannel()
    const placement = this.#options.placement()
    const child = new WorkerChild(port1, mirror, {
      graceMs: this.#options.abortGraceMs,
      placement,
      terminate: (target, termination) => this.#terminate(target, termination),
      placed: (target, threadId) => this.#place(target, threadId),
      closing: () => this.#closing,
    })
    // No per-task abort signal: piscina only shares a worker among tasks that have none, and a
    // stuck child is stopped by terminating its thread (see #terminate) on every setting alike.
    const task = this.#pool.run({ request: this.#request(spec, placement), port: port2 }, { transferList: [port2] })
    child.attach(task)
    const leave = () => {
      this.#ended.add(child)
      this.#forget(child)
      this.#leave()
    }
    task.then(leave, leave)
    await child.created(signal)
    return child
  }

  async close(): Promise<void> {
    this.#closing = true
    for (const waiter of this.#waiting.splice(0)) waiter.fail(new Error('the host was closed while the child waited for a worker'))
    await this.#pool.destroy()
  }

  #request(spec: ChildSpec, placement: Placement): CreateRequest {
    const { agentModule, persona, maxParallelToolCalls } = this.#options
    const request: CreateRequest = {
      v: PROTOCOL_VERSION,
      type: 'create',
      spec,
      maxParallelToolCalls,
      hostModels: [...placement.models.keys()],
      hostTools: [...placement.tools.values()].map(describeTool),
    }
    if (agentModule) request.agentModule = agentModule.href
    if (persona !== undefined) request.persona = persona
    return request
  }

  /** Waits for a free slot; an abort while waiting leaves the queue at once. */
  #admit(signal: AbortSignal): Promise<void> {
    if (this.#closing) return Promise.reject(new Error('the host is closed: create a new host to start more subagents'))
    if (this.#admitted < this.#capacity) {
      this.#admitted++
      return Promise.resolve()
    }
    return new Promise((resolve, reject) => {
      const waiter = {
        wake: () => {
          signal.removeEventListener('abort', onAbort)
          this.#admitted++
          resolve()
        },
        fail: (error: Error) => {
          signal.removeEventListener('abort', onAbort)
          reject(error)
        },
      }
      const onAbort = () => {
        const index = this.#waiting.indexOf(waiter)
        if (index >= 0) this.#waiting.splice(index, 1)
        reject(signal.reason)
      }
      signal.addEventListener('abort', onAbort, { once: true })
      this.#waiting.push(waiter)
    })
  }

  #leave(): void {
    this.#admitted--
    this.#waiting.shift()?.wake()
  }

  #place(child: WorkerChild, threadId: number): void {
    if (this.#ended.has(child)) return
    let children = this.#threads.get(threadId)
    if (!children) this.#threads.set(threadId, (children = new Set()))
    children.add(child)
  }

  #forget(child: WorkerChild): void {
    const { threadId } = child
    if (threadId === undefined) return
    const children = this.#threads.get(threadId)
    children?.delete(child)
    if (children?.size === 0) this.#threads.delete(threadId)
  }

  /** Terminates a stuck child's worker; every other child on that thread learns why it died. */
  #terminate(child: WorkerChild, termination: ChildTermination): void {
    const siblings = child.threadId === undefined ? [] : [...(this.#threads.get(child.threadId) ?? [])]
    for (const sibling of siblings) {
      if (sibling !== child) {
        sibling.doom({
          stopReason: 'error',
          diagnostic: `the worker thread this child shared was terminated because sibling subagent ${child.id} did not stop within ${this.#options.abortGraceMs} ms of being cancelled`,
        })
      }
    }
    child.doom(termination)
    const worker = this.#pool.threads.find((thread) => thread.threadId === child.threadId)
    // piscina sees the exit, fails the thread's tasks and starts a replacement.
    if (worker) void worker.terminate()
    else child.abandon(termination)
  }
}

function describeTool(tool: ToolDefinition): RemoteToolDescriptor {
  const descriptor: RemoteToolDescriptor = { name: tool.name, description: tool.description, parameters: tool.parameters }
  if (tool.needsApproval !== undefined) descriptor.needsApproval = tool.needsApproval
  if (tool.concurrencySafe !== undefined) descriptor.concurrencySafe = tool.concurrencySafe
  return descriptor
}
