/**
 * The spawn and fork providers (CONTRACT.md §1): the request checked once (request.ts), the
 * child's spec, the creation transaction, publication, and the hand-off to a live run. Spawn and
 * fork differ only in the seed.
 */
import type { ChildSpec } from '../../agent/child.js'
import type { AgentOptions } from '../../agent/view.js'
import type { ChildMode, SessionEvent, SessionHeader } from '../../protocol/shapes/session.js'
import { Budget } from './budget.js'
import { leftOfView, type ChildLimits } from './limits.js'
import type { Lifecycle, SubagentStartEvent } from './lifecycle.js'
import { DelegationRun } from './run.js'
import { newSessionId, type SessionStore, type SessionWriter } from './stores/store.js'
import type { ChildHandle, ChildMirror, ChildTransport } from '../transport.js'
import { ContinuableChild, type ContinuableInit } from './continuable/continuable.js'
import { ChildWatch, type Mirror } from './watch/watch.js'
import { delegatingCallOf } from '../../agent/tools/delegating-call.js'
import { abortedBeforePublication, startRequestOf, type StartRequest } from './request.js'
import type { ContinuableRun, ContinuableStartRequest, HostProvider, SubagentResult, SubagentRun, SubagentStartRequest } from '../types.js'
import { hostClosed } from '../../protocol/errors.js'

/** What a provider needs from its host. */
export interface ProviderHost {
  readonly transport: ChildTransport
  readonly lifecycle: Lifecycle
  /** 'inline', 'worker', 'process', or a given transport's name: what diagnostics report. */
  readonly transportName: string
  /** Settles when the agent module is loaded; rejects if the host is closed or the module failed. */
  ready(): Promise<void>
  /** True once close() began: nothing may be published after that. */
  closed(): boolean
  globalToolNames(): string[]
  /** Makes the child visible in `host.agents` and starts its transcript in the store. */
  publish(mirror: Mirror): SessionWriter
  track(run: DelegationRun): void
  retire(run: DelegationRun): void
  /** A continuable child started by `parentId`: live in `host.agents` and the host's continuables. */
  trackContinuable(child: ContinuableChild, parentId: string): void
  retireContinuable(child: ContinuableChild): void
  endOrphansOf(id: string): Promise<void>
  /** Every live agent's budget by id (CONTRACT.md §11): a parent's is where a child's inherits from. */
  readonly budgets: Map<string, Budget>
  /** The host's default limits for every child. */
  readonly limits: ChildLimits | undefined
  /** Where a parent that is not live here left its descendants' sessions (what its tree spent). */
  readonly store: SessionStore
  /** The deployment persona, which a child without its own is given. */
  readonly persona: string | undefined
}

export function createProvider(host: ProviderHost, name: 'spawn' | 'fork'): HostProvider {
  const inheritsParentContext = name === 'fork'
  return {
    name,
    capabilities: { outputSchema: true, depthLimit: true, toolFilter: true, persona: true },
    inheritsParentContext,
    // `structured` is checked against the very schema its type is read from, so typing it from the
    // schema holds; the casts keep the checker from expanding that type for an unknown schema here.
    start: ((request: SubagentStartRequest) => start(host, name, inheritsParentContext, request)) as unknown as HostProvider['start'],
    run: ((request: SubagentStartRequest) => run(host, name, inheritsParentContext, request)) as unknown as HostProvider['run'],
    startContinuable: (request) => startContinuable(host, name, inheritsParentContext, request),
  }
}

/** start, then result, then dispose: the result, or what failed (both, when both did). */
async function run(host: ProviderHost, provider: string, fork: boolean, request: SubagentStartRequest): Promise<SubagentResult> {
  const started = await start(host, provider, fork, request)
  const [outcome] = await Promise.allSettled([started.result])
  const [released] = await Promise.allSettled([started.dispose()])
  if (released.status === 'rejected') {
    if (outcome.status === 'rejected') throw new AggregateError([outcome.reason, released.reason], `subagent ${started.id} failed, and releasing it failed too`)
    throw released.reason
  }
  if (outcome.status === 'rejected') throw outcome.reason
  return outcome.value
}

/** What the creation transaction leaves: a published child, built on its transport, its run not begun. */
interface Published extends ContinuableInit {
  options: AgentOptions
  seedLength: number
}

async function start(host: ProviderHost, provider: string, fork: boolean, request: SubagentStartRequest): Promise<SubagentRun> {
  const published = await publishChild(host, provider, fork, request, 'one-shot')
  const { started, handle, mirror, watch, childMirror, writer, prompt, signal, spec, seedLength, options, budget, spent } = published
  const delegation = new DelegationRun(
    {
      started,
      handle,
      mirror,
      watch,
      record: (event) => childMirror.append(event),
      writer,
      prompt,
      signal,
      structuredRequested: spec.outputSchema !== undefined,
      seedLength,
      options,
      budget,
      ...(spent ? { spent } : {}),
    },
    { lifecycle: host.lifecycle, retire: (r) => host.retire(r), endOrphansOf: (owner) => host.endOrphansOf(owner) },
  )
  host.track(delegation)
  return delegation
}

/** A continuable child (CONTRACT.md §13): published with its first message in its inbox; the work is not waited for. */
async function startContinuable(host: ProviderHost, provider: string, fork: boolean, request: ContinuableStartRequest): Promise<ContinuableRun> {
  const { started, handle, spec, mirror, childMirror, watch, writer, prompt, signal, budget, spent } = await publishChild(host, provider, fork, request, 'continuable')
  const child = new ContinuableChild(
    { started, handle, spec, mirror, childMirror, watch, writer, prompt, signal, budget, ...(spent ? { spent } : {}) },
    { transport: host.transport, lifecycle: host.lifecycle, endOrphansOf: (owner) => host.endOrphansOf(owner), retire: (c) => host.retireContinuable(c) },
  )
  host.trackContinuable(child, started.parentId)
  return child
}

/** The checked request (request.ts), the child's spec, the creation transaction and publication (CONTRACT.md §1). */
async function publishChild(host: ProviderHost, provider: string, fork: boolean, given: SubagentStartRequest, mode: ChildMode): Promise<Published> {
  const request = await startRequestOf(given, { mode, fork, persona: host.persona, ready: () => host.ready(), globalToolNames: () => host.globalToolNames() })
  const parentBudget = host.budgets.get(request.parent.id)
  const view = parentBudget ? undefined : await leftOfView(host.store, request.parent)
  const inherited = Budget.inherit(parentBudget, request.limits, host.limits, view?.limits)
  inherited.spent ??= view?.spent
  const spec = specOf(newSessionId(), request, provider, inherited.limits)
  // Known before the child is built: its host-placed models are metered by it from the first request.
  const budget = new Budget(parentBudget, inherited.limits)
  const built = await build(host, spec, request, budget)
  // The transaction's last check, in the same synchronous run as the publication: an abort or a
  // close lands either before it (rolled back) or after the publication.
  if (request.signal.aborted || host.closed()) await rollBack(request.signal, built)
  const writer = host.publish(built.mirror)
  built.connect(writer)
  // One run, one child: the run is known by the child's id everywhere (events, tool values).
  const { id, header } = spec
  // Frozen: every subagent/start listener gets this object, and subagent/end repeats it (a listener's write must not unpair them).
  const started: SubagentStartEvent = Object.freeze({ runId: id, provider, id, local: host.transport.local, ...(request.label === undefined ? {} : { label: request.label }), parentId: request.parent.id, depth: request.depth })
  host.lifecycle.emit('subagent/start', started)
  built.watch.published(started)
  const { handle, mirror, childMirror, watch } = built
  const { prompt, signal, options } = request
  return { started, handle, spec, mirror, childMirror, watch, writer, prompt, signal, options, seedLength: header.seedLength ?? 0, budget, ...(inherited.spent ? { spent: inherited.spent } : {}) }
}

/** What the child is, as its transport builds it: the header its session starts with, and the checked request's parts. */
function specOf(id: string, request: StartRequest, provider: string, limits: ChildLimits): ChildSpec {
  const { options, label, seed } = request
  const header: SessionHeader = {
    type: 'session',
    id,
    createdAt: new Date().toISOString(),
    parentSession: request.parent.id,
    origin: 'subagent',
    delegationDepth: request.depth,
    ...(options.provider === undefined ? {} : { provider: options.provider }),
    ...(options.model === undefined ? {} : { model: options.model }),
    ...(label === undefined ? {} : { label }),
    providerKind: request.fork ? 'fork' : 'spawn',
  }
  if (request.cwd !== undefined) header.cwd = request.cwd
  if (seed.length > 0) header.seedLength = seed.length
  if (Object.keys(limits).length > 0) header.limits = limits
  const { mode } = request
  const spec: ChildSpec = { id, header, options, seed, descriptor: label === undefined ? { mode, provider } : { mode, provider, label } }
  if (request.persona !== undefined) spec.persona = request.persona
  if (request.toolFilter) spec.toolFilter = request.toolFilter
  if (request.outputSchema !== undefined) spec.outputSchema = request.outputSchema
  return spec
}

/** A child built, unpublished: `connect` gives it the store's writer once it is published. */
interface Built {
  handle: ChildHandle
  mirror: Mirror
  childMirror: ChildMirror
  watch: ChildWatch
  connect(writer: SessionWriter): void
  /** Takes the child's node out of the budget tree (a rollback). */
  dropBudget(): void
}

/** The creation transaction: builds the child unpublished; on abort or failure, rolls back. */
async function build(host: ProviderHost, spec: ChildSpec, request: StartRequest, budget: Budget): Promise<Built> {
  const { id } = spec
  const { signal } = request
  // The mirror shares the seed's (immutable) events but not the array the child appends to.
  const mirror: Mirror = { id, options: spec.options, session: { header: spec.header, events: [...request.seed] } }
  let writer: SessionWriter | undefined
  host.budgets.set(id, budget)
  const dropBudget = () => {
    budget.end()
    host.budgets.delete(id)
  }
  const parentCallId = delegatingCallOf(request.parent.id)
  const watch = new ChildWatch({ mirror, lifecycle: host.lifecycle, transport: host.transportName, ...(parentCallId === undefined ? {} : { parentCallId }) })
  const childMirror: ChildMirror = {
    view: mirror,
    append(event: SessionEvent) {
      mirror.session.events.push(event)
      writer?.append(event)
      budget.observe(event)
      watch.recorded(event)
    },
    requested: () => watch.requested(),
  }
  let handle: ChildHandle
  try {
    handle = await host.transport.create(spec, childMirror, signal)
  } catch (error) {
    dropBudget()
    if (signal.aborted) throw abortedBeforePublication(signal)
    if (host.closed()) throw hostClosed('start more subagents')
    throw error
  }
  return { handle, mirror, childMirror, watch, connect: (published) => void (writer = published), dropBudget }
}

/** Undoes the creation transaction (nothing was published) and rejects the start: aborted, or the host closed. */
async function rollBack(signal: AbortSignal, built: Built): Promise<never> {
  built.dropBudget()
  await built.handle.rollback()
  throw signal.aborted ? abortedBeforePublication(signal) : hostClosed('start more subagents')
}
