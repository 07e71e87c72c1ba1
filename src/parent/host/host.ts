/**
 * The host: the registry of published agents, host-placed models and tools, the providers, the
 * store and the lifecycle events, over one transport.
 */
import { randomUUID } from 'node:crypto'
import { DELEGATION_SCOPE } from '../../agent/child.js'
import { AgentRuntime, type AgentEnvironment } from '../../agent/loop.js'
import type { Model } from '../../agent/models/model.js'
import type { AgentHooks, AgentModule } from '../../agent/module.js'
import { SECTION_ORDER } from '../../agent/prompt.js'
import { defineTool, type ToolDefinition } from '../../agent/tools/tools.js'
import type { Agent, AgentOptions, AgentView } from '../../agent/view.js'
import type { SessionEvent, SessionHeader } from '../../protocol/shapes/session.js'
import { InlineTransport } from '../runners/inline.js'
import { createJobRegistry, type JobRegistry } from '../driver/jobs.js'
import { Lifecycle, type LifecycleEventName, type LifecycleEvents } from '../driver/lifecycle.js'
import { loadAgentModule } from '../../agent/module-loader.js'
import { Budget, meteredModel } from '../driver/budget.js'
import { checkLimits, spentInTree, type ChildLimits } from '../driver/limits.js'
import { checkAgentOptions, isNonNegativeSafeInteger } from '../options.js'
import { PoolTransport } from '../runners/pool-transport.js'
import { ENDPOINTS } from '../runners/endpoints/table.js'
import { settingsOf, type HostOptions, type HostSettings } from './settings.js'
import { createProvider } from '../driver/provider.js'
import type { DelegationRun } from '../driver/run.js'
import type { Mirror } from '../driver/watch/watch.js'
import { attachContinuables, Continuables } from '../driver/continuable/continuables.js'
import type { ContinuableChild } from '../driver/continuable/continuable.js'
import { checkSessionId, SessionWriter } from '../driver/stores/store.js'
import { deliverSettlementNotices, type Notifiable } from './notices.js'
import type { ChildTransport } from '../transport.js'
import type { HostProvider, Placement } from '../types.js'
import { hostClosed, subagentError } from '../../protocol/errors.js'

export type { HostOptions }

export interface AgentInit {
  id?: string
  options?: AgentOptions
  header?: { cwd?: string; delegationDepth?: number; parentSession?: string }
  /**
   * Limits for this agent and, never widened, every child it delegates to: one budget for a whole
   * delegation tree (CONTRACT.md §11). `maxSteps` bounds each turn; without it a turn makes at
   * most DEFAULT_MAX_STEPS model requests.
   */
  limits?: ChildLimits
}

export interface Host {
  models: { register(name: string, model: Model): () => void }
  tools: { register(tool: ToolDefinition): () => void; get(name: string): ToolDefinition | undefined; list(): ToolDefinition[] }
  agents: { get(id: string): AgentView | undefined; list(): AgentView[] }
  spawn: HostProvider
  fork: HostProvider
  /** Background one-shot runs started by the `subagent` tool. */
  jobs: JobRegistry
  createAgent(init?: AgentInit): Agent
  /** Rebuilds a top-level agent from its stored transcript; later events append to it. */
  resumeAgent(id: string, options?: AgentOptions): Promise<Agent>
  on<E extends LifecycleEventName>(event: E, listener: (info: LifecycleEvents[E]) => void): () => void
  /** Settles every live run (`aborted`), stops the pool, flushes the store. */
  close(): Promise<void>
  /** close(): `await using host = createHost(...)` closes it when the block is left. */
  [Symbol.asyncDispose](): Promise<void>
}

/** Where children run: the host's thread, worker threads or child processes (one pool per depth). */
function transportOf(settings: HostSettings, childEnvironment: () => AgentEnvironment, placement: (id: string) => Placement): ChildTransport {
  const { isolation, pool, agentModule, persona, maxParallelToolCalls, abortGraceMs, sandbox } = settings
  const config = { maxParallelToolCalls, abortGraceMs, ...(agentModule ? { agentModule: agentModule.href } : {}), ...(persona === undefined ? {} : { persona }) }
  if (settings.transport) return settings.transport.open({ abortGraceMs, config, placement })
  if (isolation === 'inline') return new InlineTransport(childEnvironment, persona)
  const open = ENDPOINTS[isolation]({ env: pool.env, resourceLimits: pool.resourceLimits, sandbox, agentModule })
  return new PoolTransport({ open, pool, abortGraceMs, config, placement })
}

export function createHost(options: HostOptions = {}): Host {
  const settings = settingsOf(options)
  const lifecycle = new Lifecycle()
  const store = settings.store
  const hostModels = new Map<string, Model>()
  const hostTools = new Map<string, ToolDefinition>()
  const agents = new Map<string, AgentView>()
  const runs = new Map<string, DelegationRun>()
  const continuables = new Continuables()
  const budgets = new Map<string, Budget>()
  const topLevel = new Map<string, { agent: AgentRuntime; writer: SessionWriter }>()
  const jobs = createJobRegistry()
  let loaded: AgentModule = {}
  const hooks: AgentHooks = {}
  let closing: Promise<void> | undefined

  const moduleTool = (name: string) => loaded.tools?.find((t) => t.name === name)
  const env: AgentEnvironment = {
    models: { get: (name) => hostModels.get(name) ?? loaded.models?.[name] },
    tools: {
      get: (name) => hostTools.get(name) ?? moduleTool(name),
      list: () => [...hostTools.values(), ...(loaded.tools ?? [])],
    },
    hooks,
    maxParallelToolCalls: settings.maxParallelToolCalls,
    delegated: false,
  }

  const moduleUrl = settings.agentModule
  const loading = (async () => {
    if (moduleUrl === undefined) return
    const module = await loadAgentModule(moduleUrl)
    for (const name of Object.keys(module.models ?? {})) {
      if (hostModels.has(name)) throw subagentError('ERR_SUBAGENT_DUPLICATE', `model "${name}" is registered on the host and in the agent module: give one of them another name`)
    }
    for (const tool of module.tools ?? []) {
      if (hostTools.has(tool.name)) throw subagentError('ERR_SUBAGENT_DUPLICATE', `tool "${tool.name}" is registered on the host and in the agent module: give one of them another name`)
    }
    loaded = module
    Object.assign(hooks, module.hooks)
  })()
  loading.catch(() => {}) // surfaced by every start() and every top-level turn instead
  env.ready = loading

  // A child sees the models and tools registered when it was created, on either transport:
  // later registrations are for later children.
  // Its host models count against its budget: the host meters what it serves itself.
  const hostPlacement = (id: string): Placement => {
    const budget = budgets.get(id)
    const models = new Map([...hostModels].map(([name, model]) => [name, budget ? meteredModel(model, budget) : model]))
    return { models, tools: new Map(hostTools) }
  }
  const childEnvironment = (): AgentEnvironment => {
    const models = new Map([...hostModels, ...Object.entries(loaded.models ?? {})])
    const tools = new Map<string, ToolDefinition>([...hostTools, ...(loaded.tools ?? []).map((t) => [t.name, t] as const)])
    return { ...env, models, tools: { get: (name) => tools.get(name), list: () => tools.values() } }
  }
  const transport = transportOf(settings, childEnvironment, hostPlacement)

  const providerHost = {
    transport,
    lifecycle,
    transportName: settings.transport?.name ?? settings.isolation,
    async ready() {
      if (closing) throw hostClosed('start more subagents')
      await loading
      if (closing) throw hostClosed('start more subagents')
    },
    closed: () => closing !== undefined,
    globalToolNames: () => [...env.tools.list()].map((t) => t.name),
    publish(mirror: Mirror) {
      agents.set(mirror.id, mirror)
      return new SessionWriter(store, mirror.session.header, mirror.session.events)
    },
    track: (run: DelegationRun) => void runs.set(run.id, run),
    endJobsOf: (owner: string) => jobs.endJobsOf(owner),
    retire(run: DelegationRun) {
      runs.delete(run.id)
      agents.delete(run.id)
      budgets.delete(run.id)
    },
    trackContinuable: (child: ContinuableChild, parentId: string) => continuables.add(child, parentId),
    retireContinuable(child: ContinuableChild) {
      continuables.retire(child.id)
      agents.delete(child.id)
      budgets.delete(child.id)
    },
    budgets,
    limits: settings.limits,
  }

  /** Registers a top-level agent whose loop runs in this thread; `events` resume a stored one. */
  const adopt = (header: SessionHeader, agentOptions: AgentOptions, events?: SessionEvent[], spentBefore = 0): Agent => {
    const { id } = header
    // The root of its delegation tree's budget (CONTRACT.md §11): its children inherit what it has left.
    const budget = new Budget(undefined, header.limits ?? {}, spentBefore)
    // A resumed subagent is still delegated: it can ask nobody for approval and keeps its scope.
    const delegated = header.origin === 'subagent'
    const writer = new SessionWriter(store, header, [], events !== undefined)
    // Disposing it unregisters it; its transcript stays in the store, complete.
    const release = async () => {
      await jobs.endJobsOf(id) // nobody could collect its background jobs once it is gone
      if (agents.get(id) === agent) agents.delete(id)
      if (topLevel.get(id)?.agent === agent) topLevel.delete(id)
      if (budgets.get(id) === budget) budgets.delete(id)
      budget.end()
      await writer.close()
    }
    const agent: AgentRuntime = new AgentRuntime({ id, options: agentOptions, header, ...(events ? { seed: events } : {}), release }, { ...env, delegated, admit: () => budget.refusal() })
    if (settings.persona !== undefined) agent.prompt.set({ id: 'persona', order: SECTION_ORDER.persona, text: settings.persona })
    if (delegated) agent.prompt.set({ id: 'delegation-scope', order: SECTION_ORDER.delegationScope, text: DELEGATION_SCOPE })
    agent.session.onAppend((event) => {
      writer.append(event)
      budget.observe(event)
    })
    budgets.set(id, budget)
    budget.begin({ stop: (reason) => agent.cancel(reason) }, { unref: true })
    agents.set(id, agent)
    topLevel.set(id, { agent, writer })
    return agent
  }

  const taken = (kind: 'model' | 'tool', name: string, hostHas: boolean, moduleHas: boolean) => {
    if (hostHas) throw subagentError('ERR_SUBAGENT_DUPLICATE', `${kind} "${name}" is already registered on this host: register each name once, or give this one another name`)
    if (moduleHas) throw subagentError('ERR_SUBAGENT_DUPLICATE', `${kind} "${name}" is already defined by the agent module: give the host ${kind} another name`)
  }

  const host: Host = {
    models: {
      register(name, model) {
        if (typeof name !== 'string' || name === '') throw subagentError('ERR_SUBAGENT_ARGUMENT', 'a model name must be a non-empty string')
        if (typeof model?.stream !== 'function') throw subagentError('ERR_SUBAGENT_ARGUMENT', `model "${name}" must have a stream(request) method`)
        taken('model', name, hostModels.has(name), loaded.models?.[name] !== undefined)
        hostModels.set(name, model)
        return () => {
          if (hostModels.get(name) === model) hostModels.delete(name)
        }
      },
    },
    tools: {
      register(tool) {
        const defined = defineTool(tool)
        taken('tool', defined.name, hostTools.has(defined.name), moduleTool(defined.name) !== undefined)
        hostTools.set(defined.name, defined)
        return () => {
          if (hostTools.get(defined.name) === defined) hostTools.delete(defined.name)
        }
      },
      get: (name) => env.tools.get(name),
      list: () => [...env.tools.list()],
    },
    agents: {
      get: (id) => agents.get(id),
      list: () => [...agents.values()],
    },
    spawn: createProvider(providerHost, 'spawn'),
    fork: createProvider(providerHost, 'fork'),
    jobs,
    createAgent(init = {}) {
      if (closing) throw hostClosed('create agents')
      const id = init.id === undefined ? randomUUID() : checkSessionId(init.id)
      if (agents.has(id)) throw subagentError('ERR_SUBAGENT_DUPLICATE', `an agent with id "${id}" already exists on this host`)
      const agentOptions = { ...checkAgentOptions(init.options ?? {}, 'agent options') }
      const limits = checkLimits(init.limits)
      const { provider, model } = agentOptions
      const header: SessionHeader = {
        type: 'session',
        id,
        createdAt: new Date().toISOString(),
        ...checkHeaderInit(init.header),
        ...(provider === undefined ? {} : { provider }),
        ...(model === undefined ? {} : { model }),
        ...(limits === undefined ? {} : { limits }),
      }
      return adopt(header, agentOptions)
    },
    async resumeAgent(id, resumeOptions = {}) {
      if (closing) throw hostClosed('resume agents')
      checkSessionId(id)
      // Refused before the store is read or its transcript claimed.
      const given = checkAgentOptions(resumeOptions, 'resume options')
      if (agents.has(id)) throw subagentError('ERR_SUBAGENT_DUPLICATE', `agent "${id}" is already live on this host: dispose() it first to resume it from the store`)
      const stored = await store.read(id)
      if (!stored) throw subagentError('ERR_SUBAGENT_UNKNOWN_NAME', `no session "${id}" in the store: resume an id the store lists (store.list()), or createAgent() to start a new one`)
      if (closing) throw hostClosed('resume agents')
      if (agents.has(id)) throw subagentError('ERR_SUBAGENT_DUPLICATE', `agent "${id}" is already live on this host: dispose() it first to resume it from the store`)
      // Claims the transcript before anything runs: a second live writer is refused here, not at the first write.
      await store.append(id, [])
      // The header keeps the agent's model: options given here override it.
      const { provider, model } = stored.header
      const options = { ...(provider === undefined ? {} : { provider }), ...(model === undefined ? {} : { model }), ...given }
      const spent = stored.header.limits?.maxTotalTokens === undefined ? 0 : await spentInTree(store, stored.header, stored.events)
      return adopt(stored.header, options, stored.events, spent)
    },
    on: (event, listener) => lifecycle.on(event, listener),
    close() {
      return (closing ??= (async () => {
        await Promise.allSettled([...runs.values(), ...continuables.runs()].map((run) => run.dispose()))
        await jobs.killAll()
        for (const { agent } of topLevel.values()) agent.cancel({ kind: 'host-closed' })
        await Promise.allSettled([...topLevel.values()].map(({ agent }) => agent.whenIdle()))
        for (const id of topLevel.keys()) budgets.get(id)?.end() // their deadlines with them
        await transport.close()
        const flushed = await Promise.allSettled([...topLevel.values()].map(({ writer }) => writer.close()))
        const failures = flushed.flatMap((r) => (r.status === 'rejected' ? [r.reason] : []))
        if (failures.length > 0) throw new AggregateError(failures, 'the host closed, but some transcripts could not be stored')
      })())
    },
    [Symbol.asyncDispose]: () => host.close(),
  }
  attachContinuables(host, continuables)
  // A notice goes to the agent that started the child, wherever its loop runs.
  deliverSettlementNotices(lifecycle, (id): Notifiable | undefined => {
    const top = topLevel.get(id)?.agent
    if (top) return { notify: ({ text, source }) => top.notify(text, source) }
    const live = continuables.lookup(id)
    return runs.get(id) ?? (live?.kind === 'live' ? live.run : undefined)
  })
  return host
}

function checkHeaderInit(header: AgentInit['header']): Partial<SessionHeader> {
  if (header === undefined) return {}
  if (typeof header !== 'object' || header === null) throw subagentError('ERR_SUBAGENT_HEADER', 'agent header must be an object')
  const out: Partial<SessionHeader> = {}
  if (header.cwd !== undefined) {
    if (typeof header.cwd !== 'string') throw subagentError('ERR_SUBAGENT_HEADER', 'header.cwd must be a string')
    out.cwd = header.cwd
  }
  if (header.parentSession !== undefined) {
    if (typeof header.parentSession !== 'string') throw subagentError('ERR_SUBAGENT_HEADER', 'header.parentSession must be a string')
    out.parentSession = header.parentSession
  }
  if (header.delegationDepth !== undefined) {
    if (!isNonNegativeSafeInteger(header.delegationDepth)) throw subagentError('ERR_SUBAGENT_HEADER', 'header.delegationDepth must be a non-negative safe integer')
    out.delegationDepth = header.delegationDepth
  }
  return out
}
