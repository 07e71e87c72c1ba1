/**
 * The worker transport: each child runs in a pooled worker thread (piscina), one task per child,
 * talking to the host over a MessagePort of its own.
 *
 * Children of each delegation depth get a pool of their own, created when first needed: a child
 * waiting for its own child holds its slot, so with one shared pool a wave of nested delegations
 * could fill every slot with waiting parents and never finish. Waits only point one level down,
 * so pools per level cannot deadlock.
 */
import { MessageChannel } from 'node:worker_threads'
import type { ChildSpec } from '../agent/child.js'
import type { ToolDefinition } from '../agent/tools.js'
import { PROTOCOL_VERSION, type CreateRequest, type RemoteToolDescriptor } from '../protocol/lifecycle.js'
import type { ChildHandle, ChildMirror, Transport } from './transport.js'
import type { Placement, PoolOptions } from './types.js'
import { WorkerChild, type ChildTermination } from './worker-child.js'
import { WorkerPool } from './worker-pool.js'

export interface WorkerTransportOptions {
  pool: PoolOptions
  abortGraceMs: number
  agentModule: URL | undefined
  persona: string | undefined
  maxParallelToolCalls: number
  /** Host-placed models and tools (they stay in the main thread, reached by RPC), snapshot per child. */
  placement: () => Placement
}

export class WorkerTransport implements Transport {
  readonly local = false
  readonly #options: WorkerTransportOptions
  /** By delegation depth; depth 1 (children of top-level agents) starts warm. */
  readonly #pools = new Map<number, WorkerPool>()
  /** Children whose task has ended; a late 'created' must not place them on a thread again. */
  readonly #ended = new WeakSet<WorkerChild>()
  /** Children whose task is still running, by thread: who a termination takes down. */
  readonly #threads = new Map<number, Set<WorkerChild>>()
  #closing = false

  constructor(options: WorkerTransportOptions) {
    this.#options = options
    this.#poolFor(1)
  }

  async create(spec: ChildSpec, mirror: ChildMirror, signal: AbortSignal): Promise<ChildHandle> {
    if (this.#closing) throw new Error('the host is closed: create a new host to start more subagents')
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
    let task: Promise<unknown>
    let forfeit: () => void
    try {
      const pool = this.#poolFor(spec.header.delegationDepth ?? 1)
      ;({ running: task, forfeit } = await pool.run({ request: this.#request(spec, placement), port: port2 }, [port2], signal))
    } catch (error) {
      port1.close()
      throw error
    }
    child.attach(task, forfeit)
    const ended = () => {
      this.#ended.add(child)
      this.#forget(child)
    }
    task.then(ended, ended)
    await child.created(signal)
    return child
  }

  async close(): Promise<void> {
    this.#closing = true
    await Promise.all([...this.#pools.values()].map((pool) => pool.close()))
  }

  #poolFor(depth: number): WorkerPool {
    let pool = this.#pools.get(depth)
    if (!pool) {
      // Only the first level is kept warm; deeper pools start their threads on demand.
      pool = new WorkerPool(this.#options.pool, depth === 1)
      this.#pools.set(depth, pool)
    }
    return pool
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
  #terminate(child: WorkerChild, termination: ChildTermination): boolean {
    const { threadId } = child
    const siblings = threadId === undefined ? [] : [...(this.#threads.get(threadId) ?? [])]
    for (const sibling of siblings) {
      if (sibling !== child) {
        sibling.doom({
          stopReason: 'error',
          diagnostic: `the worker thread this child shared was terminated because sibling subagent ${child.id} did not stop within ${this.#options.abortGraceMs} ms of being cancelled`,
        })
      }
    }
    child.doom(termination)
    const worker = threadId === undefined ? undefined : [...this.#pools.values()].map((pool) => pool.thread(threadId)).find(Boolean)
    // piscina sees the exit, fails the thread's tasks and starts a replacement.
    if (worker) void worker.terminate()
    else child.abandon(termination)
    return worker !== undefined
  }
}

function describeTool(tool: ToolDefinition): RemoteToolDescriptor {
  const descriptor: RemoteToolDescriptor = { name: tool.name, description: tool.description, parameters: tool.parameters }
  if (tool.needsApproval !== undefined) descriptor.needsApproval = tool.needsApproval
  if (tool.concurrencySafe !== undefined) descriptor.concurrencySafe = tool.concurrencySafe
  return descriptor
}
