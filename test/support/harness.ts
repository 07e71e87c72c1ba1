/**
 * Shared set-up for the contract suite. Every contract test runs once per transport; adding a
 * transport to TRANSPORTS is the only change a new transport needs here.
 *
 * Tests wait for the event they mean (a model request, an event on the host, a fixture's
 * signal), never for time: see test/README.md.
 */
import { randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { inject } from 'vitest'
import { createHost, createMemoryStore, ScriptedModel, type Host, type HostOptions, type ModelRequest, type ScriptEntry, type SessionEvent, type SessionStore, type StreamChunk } from 'subagent-worker'
import { bullmqTransport } from 'subagent-worker/bullmq'
import { Watch } from './watch.js'
import { startTestNode } from './nodes.js'

export type TransportName = 'inline' | 'worker' | 'process' | 'bullmq'

/** The shared worker nodes (test/support/global-nodes.ts); undefined when no Redis is reachable. */
export const BULLMQ = inject('bullmq')

/** Every transport; 'bullmq' (children on two worker nodes through Redis) when a Redis is reachable. */
export const TRANSPORTS: readonly TransportName[] = BULLMQ ? ['inline', 'worker', 'process', 'bullmq'] : ['inline', 'worker', 'process']
/** The host's own isolation modes (createHost's `isolation`), for what tests that option itself. */
export const ISOLATIONS = ['inline', 'worker', 'process'] as const
/** The transports that run children on pooled runners (threads, processes): where CONTRACT.md §8 applies. */
export const POOLED = ['worker', 'process'] as const

export const CONTRACT_MODULE = fileURLToPath(new URL('../fixtures/contract-module.mjs', import.meta.url))

/** A ScriptedModel whose requests a test can wait for. */
export class WatchedModel extends ScriptedModel {
  readonly #watch = new Watch()

  /** Resolves once the model has had `n` requests, before the call or after. */
  requested(n: number): Promise<void> {
    return this.#watch.until(`model request ${n}`, () => this.requests.length >= n)
  }

  override async *stream(request: ModelRequest): AsyncGenerator<StreamChunk> {
    const chunks = super.stream(request)
    // The first step runs the script up to its first chunk, and records the request before that.
    const first = chunks.next()
    this.#watch.changed()
    const step = await first
    if (step.done) return
    yield step.value
    yield* chunks
  }
}

export interface Fixture {
  host: Host
  /** The host-placed scripted model registered as provider "scripted". */
  model: WatchedModel
  /** A top-level parent routed to the scripted model. */
  parent: ReturnType<Host['createAgent']>
}

const open: Host[] = []

/** A host on `transport` with the contract module, a scripted model and a parent agent. */
export function setup(transport: TransportName, script: ScriptEntry[] = [], options: Omit<HostOptions, 'isolation'> = {}): Fixture {
  const host = createHost({ ...hostOptions(transport), agentModule: CONTRACT_MODULE, ...withoutPool(transport, options) })
  open.push(host)
  const model = new WatchedModel(script)
  host.models.register('scripted', model)
  const parent = host.createAgent({ options: { provider: 'scripted', model: 'scripted-1' } })
  return { host, model, parent }
}

/** What selects `transport` in createHost's options. */
export function hostOptions(transport: TransportName): HostOptions {
  if (transport !== 'bullmq') return { isolation: transport }
  if (!BULLMQ) throw new Error('no Redis: the bullmq transport is not in TRANSPORTS')
  return { transport: bullmqTransport({ connection: BULLMQ.redis, queue: BULLMQ.queue }) }
}

/**
 * What selects `transport` for a test whose child kills its runner: on the bullmq transport, a
 * node of the test's own serving `modules` (stopped when the test finishes). On the shared
 * nodes a thread-mate from another file, cancelled and slow to stop on a loaded machine, could
 * end the runner first with its own diagnostic, and the kill would end that file's children.
 */
export async function ownRunnerOptions(transport: TransportName, modules: string[], onTestFinished: (fn: () => Promise<void>) => void): Promise<HostOptions> {
  if (transport !== 'bullmq') return hostOptions(transport)
  const queue = `own-${randomBytes(4).toString('hex')}`
  const node = await startTestNode({ redis: BULLMQ!.redis, queue, modules, maxThreads: 1, childrenPerWorker: 1 })
  onTestFinished(() => node.stop())
  return { transport: bullmqTransport({ connection: BULLMQ!.redis, queue }) }
}

/** A node's threads are the node's: a host on the bullmq transport takes no pool option. */
function withoutPool(transport: TransportName, options: Omit<HostOptions, 'isolation'>): Omit<HostOptions, 'isolation'> {
  if (transport !== 'bullmq') return options
  const { pool: _pool, ...rest } = options
  return rest
}

/** Closes every host set up by this file's tests; call from afterEach. */
export async function closeHosts(): Promise<void> {
  await Promise.all(open.splice(0).map((host) => host.close()))
}

export function signal(): AbortSignal {
  return new AbortController().signal
}

export function types(events: readonly SessionEvent[]): string[] {
  return events.map((event) => event.type)
}

/**
 * Event types with each run of consecutive `assistant/chunk` events shown once: how streamed text
 * is split into chunks is not part of the contract (a transport may merge deltas), only its text.
 */
export function shape(events: readonly SessionEvent[]): string[] {
  return types(events).filter((type, i, all) => type !== 'assistant/chunk' || all[i - 1] !== 'assistant/chunk')
}

/** The text of each run of consecutive `assistant/chunk` events, joined. */
export function streamedRuns(events: readonly SessionEvent[]): string[] {
  const runs: string[] = []
  events.forEach((event, i) => {
    if (event.type !== 'assistant/chunk') return
    const { chunk } = event.data as { chunk: { type: string; text: string } }
    if (chunk.type !== 'text-delta') throw new Error(`assistant/chunk ${event.seq} is not a text delta`)
    if (events[i - 1]?.type === 'assistant/chunk') runs[runs.length - 1] += chunk.text
    else runs.push(chunk.text)
  })
  return runs
}

export function eventsOf<T = unknown>(events: readonly SessionEvent[], type: string): T[] {
  return events.filter((event) => event.type === type).map((event) => event.data as T)
}

/**
 * Gives stray work a moment before a check that something did NOT happen; never a way to let
 * something start (wait for its event instead, test/README.md).
 */
export function tick(ms = 0): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** A store whose appends fail for sessions other than the top-level parent's: releasing a child fails, its run does not. */
export function failingStore(): SessionStore {
  const store = createMemoryStore()
  return {
    ...store,
    create: (header) => store.create(header),
    async append(id, events) {
      const stored = await store.read(id)
      if (stored?.header.origin === 'subagent') throw new Error('disk full')
      return store.append(id, events)
    },
  }
}
