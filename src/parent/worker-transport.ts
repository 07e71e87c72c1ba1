/**
 * The worker transport: children run on pooled worker threads, many to a thread, multiplexed over
 * one long-lived channel per thread (see channel.ts and the frame protocol in src/protocol).
 *
 * Children of each delegation depth get a pool of their own, created when first needed: a child
 * waiting for its own child holds its slot, so with one shared pool a wave of nested delegations
 * could fill every slot with waiting parents and never finish. Waits only point one level down,
 * so pools per level cannot deadlock.
 */
import { availableParallelism } from 'node:os'
import type { ChildSpec } from '../protocol/child.js'
import type { RunnerConfig } from '../protocol/messages.js'
import { RemoteChild, RunnerLostError } from './remote-child.js'
import { ThreadPool } from './thread-pool.js'
import type { ChildHandle, ChildMirror, Transport } from './transport.js'
import type { Placement, PoolOptions } from './types.js'

export interface WorkerTransportOptions {
  pool: PoolOptions
  abortGraceMs: number
  agentModule: URL | undefined
  persona: string | undefined
  maxParallelToolCalls: number
  /** Host-placed models and tools (they stay in the main thread, reached by RPC), snapshot per child. */
  placement: () => Placement
}

/** A start whose thread died under it (not of its own doing) tries once more on another thread. */
const CREATE_ATTEMPTS = 2

export class WorkerTransport implements Transport {
  readonly local = false
  readonly #options: WorkerTransportOptions
  readonly #config: RunnerConfig
  /** By delegation depth; depth 1 (children of top-level agents) starts warm. */
  readonly #pools = new Map<number, ThreadPool>()
  #closing = false

  constructor(options: WorkerTransportOptions) {
    this.#options = options
    const { agentModule, persona, maxParallelToolCalls } = options
    this.#config = { maxParallelToolCalls, ...(agentModule ? { agentModule: agentModule.href } : {}), ...(persona === undefined ? {} : { persona }) }
    this.#poolFor(1)
  }

  async create(spec: ChildSpec, mirror: ChildMirror, signal: AbortSignal): Promise<ChildHandle> {
    if (this.#closing) throw new Error('the host is closed: create a new host to start more subagents')
    const pool = this.#poolFor(spec.header.delegationDepth ?? 1)
    const placement = this.#options.placement()
    for (let attempt = 1; ; attempt++) {
      const child = await pool.place(signal, (channel) => new RemoteChild(spec, mirror, channel, { placement, graceMs: this.#options.abortGraceMs }))
      try {
        await child.created(signal)
        return child
      } catch (error) {
        if (!(error instanceof RunnerLostError) || attempt >= CREATE_ATTEMPTS || signal.aborted || this.#closing) throw error
      }
    }
  }

  async close(): Promise<void> {
    this.#closing = true
    await Promise.all([...this.#pools.values()].map((pool) => pool.close()))
  }

  #poolFor(depth: number): ThreadPool {
    let pool = this.#pools.get(depth)
    if (!pool) {
      const { pool: options, abortGraceMs } = this.#options
      const cores = availableParallelism()
      const maxThreads = options.maxThreads ?? Math.max(1, Math.round(cores * 1.5))
      // Only the first level is kept warm; deeper pools start their threads on demand.
      const minThreads = depth === 1 ? Math.min(maxThreads, options.minThreads ?? Math.max(1, Math.floor(cores / 2))) : 0
      pool = new ThreadPool({
        minThreads,
        maxThreads,
        childrenPerWorker: options.childrenPerWorker ?? 1,
        idleTimeoutMs: options.idleTimeoutMs ?? 10_000,
        resourceLimits: options.resourceLimits,
        graceMs: abortGraceMs,
        config: this.#config,
      })
      this.#pools.set(depth, pool)
    }
    return pool
  }
}
