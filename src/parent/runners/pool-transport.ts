/**
 * The pooled transports, `worker` and `process`: children run on pooled runners, many to a
 * runner, multiplexed over one long-lived channel per runner (see channel.ts and the frame
 * protocol in src/protocol). They differ only in the endpoint that opens a runner
 * (endpoints/table.ts).
 *
 * Children of each delegation depth get a pool of their own, created when first needed: a child
 * waiting for its own child holds its slot, so with one shared pool a wave of nested delegations
 * could fill every slot with waiting parents and never finish. Waits only point one level down,
 * so pools per level cannot deadlock.
 */
import type { ChildSpec } from '../../protocol/shapes/child.js'
import type { RunnerConfig } from '../../protocol/messages.js'
import type { RunnerChannel } from './channel.js'
import { RemoteChild, RunnerLostError, type Replace } from './remote-child.js'
import type { OpenEndpoint } from './runner-site.js'
import { RunnerPool, type PoolSettings } from './runner-pool.js'
import type { ChildHandle, ChildMirror, ChildTransport } from '../transport.js'
import type { Placement } from '../types.js'
import { hostClosed, subagentError } from '../../protocol/errors.js'

export interface PoolTransportOptions {
  /** Opens one runner: a worker thread, a child process. */
  open: OpenEndpoint
  pool: PoolSettings
  abortGraceMs: number
  config: RunnerConfig
  /** Host-placed models and tools (they stay in the host, reached by RPC), snapshot per child. */
  placement: (id: string) => Placement
}

/** The pool of one delegation depth, and how a child moved off one of its runners is placed again. */
interface Level {
  pool: RunnerPool
  replace: Replace
}

/** A start whose runner died under it (not of its own doing) tries once more on another runner. */
const CREATE_ATTEMPTS = 2

export class PoolTransport implements ChildTransport {
  readonly local = false
  readonly #options: PoolTransportOptions
  /** By delegation depth; depth 1 (children of top-level agents) starts warm. */
  readonly #pools = new Map<number, Level>()
  #closing = false

  constructor(options: PoolTransportOptions) {
    this.#options = options
    this.#poolFor(1)
  }

  async create(spec: ChildSpec, mirror: ChildMirror, signal: AbortSignal): Promise<ChildHandle> {
    if (this.#closing) throw hostClosed('start more subagents')
    const { pool, replace } = this.#poolFor(spec.header.delegationDepth ?? 1)
    const placement = this.#options.placement(spec.id)
    const options = { placement, graceMs: this.#options.abortGraceMs, replace }
    for (let attempt = 1; ; attempt++) {
      const child = await pool.place(signal, (channel) => new RemoteChild(spec, mirror, channel, options))
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
    await Promise.all([...this.#pools.values()].map(({ pool }) => pool.close()))
  }

  #poolFor(depth: number): Level {
    let level = this.#pools.get(depth)
    if (!level) {
      const { open, pool: settings, abortGraceMs, config } = this.#options
      // Only the first level is kept warm; deeper pools start their runners on demand.
      const minThreads = depth === 1 ? settings.minThreads : 0
      const pool = new RunnerPool({ ...settings, minThreads, open, graceMs: abortGraceMs, config })
      // A moved child is placed again in the pool of its depth.
      const replace: Replace = async (moving, build) => {
        if (this.#closing) throw subagentError('ERR_SUBAGENT_HOST_CLOSED', 'the host is closing')
        await pool.place(moving, build, true)
      }
      this.#pools.set(depth, (level = { pool, replace }))
    }
    return level
  }
}
