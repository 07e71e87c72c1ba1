/**
 * The spawn and fork providers (CONTRACT.md §1): validation in the contract's order, the creation
 * transaction, publication, and the hand-off to a live run. Spawn and fork differ only in the seed.
 */
import { randomUUID } from 'node:crypto'
import type { ChildDescriptor, ChildSpec } from '../../agent/child.js'
import { toContent } from '../../agent/loop.js'
import { toJsonSchema } from '../../agent/tools/to-json-schema.js'
import { checkToolFilter, type ToolFilter } from '../../agent/tools/tools.js'
import type { AgentOptions, AgentView } from '../../agent/view.js'
import type { SessionEvent, SessionHeader } from '../../protocol/shapes/session.js'
import type { ContentBlock } from '../../protocol/shapes/content.js'
import { isContentBlock, isSessionEvent } from '../../protocol/validators.js'
import { Budget } from './budget.js'
import { checkMaxDepth, childDepthOf } from './depth.js'
import { checkLimits, type ChildLimits } from './limits.js'
import { checkAgentOptions, InvalidOptionError } from '../options.js'
import type { Lifecycle, SubagentStartEvent } from './lifecycle.js'
import { DelegationRun } from './run.js'
import type { SessionWriter } from './stores/store.js'
import type { ChildHandle, ChildMirror, ChildTransport } from '../transport.js'
import { ContinuableChild, type ContinuableInit } from './continuable/continuable.js'
import { ChildWatch, type Mirror } from './watch/watch.js'
import { delegatingCallOf } from './delegating-call.js'
import type { ContinuableRun, ContinuableStartRequest, HostProvider, SubagentResult, SubagentRun, SubagentStartRequest } from '../types.js'
import { hostClosed, subagentError } from '../../protocol/errors.js'

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
  endJobsOf(id: string): Promise<void>
  /** Every live agent's budget by id (CONTRACT.md §11): a parent's is where a child's inherits from. */
  readonly budgets: Map<string, Budget>
  /** The host's default limits for every child. */
  readonly limits: ChildLimits | undefined
}

const PRE_PUBLICATION_ABORT = 'subagent request was aborted before child publication'

function abortedBeforePublication(signal: AbortSignal): Error {
  return subagentError('ERR_SUBAGENT_ABORTED', PRE_PUBLICATION_ABORT, { cause: signal.reason })
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

type Mode = ChildDescriptor['mode']

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
    { lifecycle: host.lifecycle, retire: (r) => host.retire(r), endJobsOf: (owner) => host.endJobsOf(owner) },
  )
  host.track(delegation)
  return delegation
}

/** A continuable child (CONTRACT.md §13): published with its first message in its inbox; the work is not waited for. */
async function startContinuable(host: ProviderHost, provider: string, fork: boolean, request: ContinuableStartRequest): Promise<ContinuableRun> {
  if (typeof request === 'object' && request !== null && (request as SubagentStartRequest).outputSchema !== undefined) {
    throw subagentError('ERR_SUBAGENT_CONTINUABLE', 'a continuable child takes no outputSchema: each activation ends in text; use start() or run() for a structured result')
  }
  const { started, handle, spec, mirror, childMirror, watch, writer, prompt, signal, budget, spent } = await publishChild(host, provider, fork, request, 'continuable')
  const child = new ContinuableChild(
    { started, handle, spec, mirror, childMirror, watch, writer, prompt, signal, budget, ...(spent ? { spent } : {}) },
    { transport: host.transport, lifecycle: host.lifecycle, endJobsOf: (owner) => host.endJobsOf(owner), retire: (c) => host.retireContinuable(c) },
  )
  host.trackContinuable(child, started.parentId)
  return child
}

/** Validation in the contract's order, composition, the creation transaction and publication (CONTRACT.md §1). */
async function publishChild(host: ProviderHost, provider: string, fork: boolean, request: SubagentStartRequest, mode: Mode): Promise<Published> {
  if (typeof request !== 'object' || request === null) throw subagentError('ERR_SUBAGENT_REQUEST', 'subagent start needs a request object')
  if (request.signal !== undefined && !(request.signal instanceof AbortSignal)) throw subagentError('ERR_SUBAGENT_REQUEST', 'subagent request signal must be an AbortSignal when given')
  // Without one the run is cancelled only by dispose() or host.close(): a signal of its own that never aborts.
  const signal = request.signal ?? new AbortController().signal
  // The contract's order: maxDepth, an aborted signal, depth, outputSchema, toolFilter.
  const maxDepth = checkMaxDepth(request.maxDepth)
  if (signal.aborted) throw abortedBeforePublication(signal)
  const { parent } = request
  checkParent(parent)
  for (const key of ['label', 'persona'] as const) {
    if (request[key] !== undefined && typeof request[key] !== 'string') throw subagentError('ERR_SUBAGENT_REQUEST', `subagent request ${key} must be a string`)
  }
  const requestedLimits = checkLimits(request.limits)
  const childDepth = childDepthOf(parent, maxDepth)
  const outputSchema = request.outputSchema === undefined ? undefined : toJsonSchema(request.outputSchema, { what: 'outputSchema' })
  const prompt = promptOf(request.prompt)
  const agentOptions = request.agentOptions === undefined ? {} : checkAgentOptions(request.agentOptions, 'agentOptions')

  await host.ready()
  if (signal.aborted) throw abortedBeforePublication(signal)
  let toolFilter: ToolFilter | undefined
  if (request.toolFilter !== undefined) toolFilter = checkToolFilter(request.toolFilter, host.globalToolNames())

  const id = randomUUID()
  const seed = fork ? forkSeed(parent) : []
  const options: AgentOptions = {}
  for (const key of ['provider', 'model', 'maxTokens'] as const) {
    const value = agentOptions[key] ?? parent.options[key]
    if (value !== undefined) (options as Record<string, unknown>)[key] = value
  }
  options.subagentDepth = childDepth
  checkAgentOptions(options, "the child's options (inherited from the parent unless agentOptions overrides them)")
  const header: SessionHeader = {
    type: 'session',
    id,
    createdAt: new Date().toISOString(),
    parentSession: parent.id,
    origin: 'subagent',
    delegationDepth: childDepth,
    ...(options.provider === undefined ? {} : { provider: options.provider }),
    ...(options.model === undefined ? {} : { model: options.model }),
    ...(request.label === undefined ? {} : { label: request.label }),
    providerKind: fork ? 'fork' : 'spawn',
  }
  const { cwd } = parent.session.header
  if (cwd !== undefined) {
    if (typeof cwd !== 'string') throw subagentError('ERR_SUBAGENT_REQUEST', 'subagent parent session.header.cwd must be a string')
    header.cwd = cwd
  }
  if (seed.length > 0) header.seedLength = seed.length
  const parentBudget = host.budgets.get(parent.id)
  const inherited = Budget.inherit(parentBudget, requestedLimits, host.limits)
  if (Object.keys(inherited.limits).length > 0) header.limits = inherited.limits
  const spec: ChildSpec = {
    id,
    header,
    options,
    seed,
    descriptor: request.label === undefined ? { mode, provider } : { mode, provider, label: request.label },
  }
  if (request.persona !== undefined) spec.persona = request.persona
  if (toolFilter) spec.toolFilter = toolFilter
  if (outputSchema !== undefined) spec.outputSchema = outputSchema

  // The creation transaction: build the child unpublished; on abort or failure, roll back.
  // The mirror shares the seed's (immutable) events but not the array the child appends to.
  const mirror: Mirror = { id, options, session: { header, events: [...seed] } }
  let writer: SessionWriter | undefined
  // Known before the child is built: its host-placed models are metered by it from the first request.
  const budget = new Budget(parentBudget, inherited.limits)
  host.budgets.set(id, budget)
  const dropBudget = () => {
    budget.end()
    host.budgets.delete(id)
  }
  const parentCallId = delegatingCallOf(parent.id)
  const watch = new ChildWatch({ mirror, lifecycle: host.lifecycle, transport: host.transportName, ...(parentCallId === undefined ? {} : { parentCallId }) })
  const childMirror: ChildMirror = {
    view: mirror,
    append(event: SessionEvent) {
      mirror.session.events.push(event)
      writer?.append(event)
      budget.observe(event)
      watch.recorded(event)
    },
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
  if (signal.aborted || host.closed()) {
    dropBudget()
    await handle.rollback()
    throw signal.aborted ? abortedBeforePublication(signal) : hostClosed('start more subagents')
  }

  writer = host.publish(mirror)
  // One run, one child: the run is known by the child's id everywhere (events, tool values).
  const runId = id
  const started: SubagentStartEvent = { runId, provider, id, local: host.transport.local, ...(request.label === undefined ? {} : { label: request.label }), parentId: parent.id, depth: childDepth }
  host.lifecycle.emit('subagent/start', started)
  watch.published(started)
  return { started, handle, spec, mirror, childMirror, watch, writer, prompt, signal, options, seedLength: seed.length, budget, ...(inherited.spent ? { spent: inherited.spent } : {}) }
}

/** The child's first message: anything but a string or content blocks is refused naming `prompt`. */
function promptOf(prompt: unknown): ContentBlock[] {
  if (typeof prompt === 'string' || (Array.isArray(prompt) && prompt.every((block) => isContentBlock(block)))) return toContent(prompt)
  throw new InvalidOptionError('prompt', prompt, 'a string or an array of content blocks ({ type: "text", text } or { type: "tool-call", id, name, arguments })')
}

function checkParent(parent: unknown): asserts parent is AgentView {
  const problem = (() => {
    if (typeof parent !== 'object' || parent === null) return 'it is not an object'
    const p = parent as Partial<AgentView>
    if (typeof p.id !== 'string' || p.id === '') return 'id must be a non-empty string'
    if (typeof p.options !== 'object' || p.options === null) return 'options must be an object'
    if (typeof p.session !== 'object' || p.session === null) return 'session must be an object'
    if (typeof p.session.header !== 'object' || p.session.header === null) return 'session.header must be an object'
    if (!Array.isArray(p.session.events)) return 'session.events must be an array'
    return undefined
  })()
  if (problem) throw subagentError('ERR_SUBAGENT_REQUEST', `subagent parent must look like { id, options, session: { header, events } }: ${problem}`)
}

/** The parent's events up to and including its last `turn/end`; the in-flight turn is never copied. */
function forkSeed(parent: AgentView): SessionEvent[] {
  const { events } = parent.session
  let end = -1
  for (let i = events.length - 1; i >= 0; i--) {
    if (events[i]?.type === 'turn/end') {
      end = i
      break
    }
  }
  const seed = events.slice(0, end + 1)
  for (const [index, event] of seed.entries()) {
    if (!isSessionEvent(event)) throw subagentError('ERR_SUBAGENT_REQUEST', `parent session event ${index} is malformed: it needs a numeric seq and a string type`)
  }
  try {
    return structuredClone(seed)
  } catch (error) {
    throw subagentError('ERR_SUBAGENT_REQUEST', `parent session events must be plain data to be forked: ${(error as Error).message}`)
  }
}
