/**
 * The host: the composition root. It puts together the registry of what its agents may use
 * (registry.ts), its top-level agents (top-level.ts), the providers over one transport, the
 * store and the lifecycle events, and closes them in order.
 */
import type { AgentEnvironment } from '../../agent/loop.js'
import type { Model } from '../../agent/models/model.js'
import type { ToolDefinition } from '../../agent/tools/tools.js'
import type { Agent, AgentOptions, AgentView } from '../../agent/view.js'
import { InlineTransport } from '../runners/inline.js'
import { createJobRegistry, type JobRegistry } from '../driver/jobs.js'
import { Lifecycle, type LifecycleEventName, type LifecycleEvents } from '../driver/lifecycle.js'
import type { Budget } from '../driver/budget.js'
import { PoolTransport } from '../runners/pool-transport.js'
import { ENDPOINTS } from '../runners/endpoints/table.js'
import { settingsOf, type HostOptions, type HostSettings } from './settings.js'
import { createProvider, type ProviderHost } from '../driver/provider.js'
import type { DelegationRun } from '../driver/run.js'
import type { Mirror } from '../driver/watch/watch.js'
import { attachContinuables, Continuables } from '../driver/continuable/continuables.js'
import type { ContinuableChild } from '../driver/continuable/continuable.js'
import { SessionWriter } from '../driver/stores/store.js'
import { deliverSettlementNotices, type Notifiable } from './notices.js'
import { HostRegistry } from './registry.js'
import { TopLevelAgents, type AgentInit } from './top-level.js'
import type { ChildTransport } from '../transport.js'
import type { HostProvider, Placement } from '../types.js'
import { hostClosed } from '../../protocol/errors.js'

export type { HostOptions, AgentInit }

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
function transportOf(settings: HostSettings, childEnvironment: (id: string) => AgentEnvironment, placement: (id: string) => Placement): ChildTransport {
  const { isolation, pool, agentModule, maxParallelToolCalls, abortGraceMs, sandbox } = settings
  const config = { maxParallelToolCalls, abortGraceMs, ...(agentModule ? { agentModule: agentModule.href } : {}) }
  if (settings.transport) return settings.transport.open({ abortGraceMs, config, placement })
  if (isolation === 'inline') return new InlineTransport(childEnvironment)
  const open = ENDPOINTS[isolation]({ env: pool.env, resourceLimits: pool.resourceLimits, niceIncrement: pool.niceIncrement, sandbox, agentModule })
  return new PoolTransport({ open, pool, abortGraceMs, config, placement })
}

/** The host's live children and their budgets, which the providers fill and the host closes. */
interface Children {
  readonly agents: Map<string, AgentView>
  readonly runs: Map<string, DelegationRun>
  readonly continuables: Continuables
  readonly budgets: Map<string, Budget>
}

export function createHost(options: HostOptions = {}): Host {
  const settings = settingsOf(options)
  const lifecycle = new Lifecycle()
  const registry = new HostRegistry(settings.agentModule, settings.maxParallelToolCalls)
  const children: Children = { agents: new Map(), runs: new Map(), continuables: new Continuables(), budgets: new Map() }
  const { agents, runs, continuables, budgets } = children
  const jobs = createJobRegistry()
  let closing: Promise<void> | undefined
  const closed = () => closing !== undefined
  const transport = transportOf(settings, (id) => registry.childEnvironment(budgets.get(id)), (id) => registry.placement(budgets.get(id)))
  // What an agent started ends with it when nobody else could reach it: its background jobs, and
  // its continuable children, whose notices would have nowhere to go (a caller holding one's run
  // finds it disposed).
  const endOrphansOf = async (owner: string) => {
    const children = continuables.startedBy(owner)
    // Every one-shot child's dispose asks: most started none.
    if (children.length === 0) return jobs.endJobsOf(owner)
    await Promise.all([jobs.endJobsOf(owner), ...children.map((child) => child.dispose())])
  }
  const topLevel = new TopLevelAgents({ store: settings.store, env: registry.env, persona: settings.persona, endOrphansOf, agents, budgets, closed })
  const providerHost = providerHostOf({ settings, lifecycle, registry, transport, children, endOrphansOf, closed })

  const host: Host = {
    models: { register: (name, model) => registry.registerModel(name, model) },
    tools: {
      register: (tool) => registry.registerTool(tool),
      get: (name) => registry.env.tools.get(name),
      list: () => [...registry.env.tools.list()],
    },
    agents: {
      get: (id) => agents.get(id),
      list: () => [...agents.values()],
    },
    spawn: createProvider(providerHost, 'spawn'),
    fork: createProvider(providerHost, 'fork'),
    jobs,
    createAgent: (init = {}) => topLevel.create(init),
    resumeAgent: (id, resumeOptions = {}) => topLevel.resume(id, resumeOptions),
    on: (event, listener) => lifecycle.on(event, listener),
    close() {
      return (closing ??= (async () => {
        const disposeLive = () => Promise.allSettled([...runs.values(), ...continuables.runs()].map((run) => run.dispose()))
        await disposeLive()
        await jobs.killAll()
        // A run published as the close began (a subagent/start listener closed the host) is tracked a microtask after its publication, after the pass above.
        await disposeLive()
        await topLevel.stop()
        await transport.close()
        await topLevel.flush()
      })())
    },
    [Symbol.asyncDispose]: () => host.close(),
  }
  attachContinuables(host, continuables)
  // A notice goes to the agent that started the child, wherever its loop runs.
  deliverSettlementNotices(lifecycle, (id): Notifiable | undefined => {
    const top = topLevel.get(id)
    if (top) return { notify: ({ text, source }) => top.notify(text, source) }
    const live = continuables.lookup(id)
    return runs.get(id) ?? (live?.kind === 'live' ? live.run : undefined)
  })
  return host
}

/** What the providers are given of the host: where children run, and how they are published, tracked and retired. */
function providerHostOf(parts: {
  settings: HostSettings
  lifecycle: Lifecycle
  registry: HostRegistry
  transport: ChildTransport
  children: Children
  endOrphansOf(owner: string): Promise<void>
  closed(): boolean
}): ProviderHost {
  const { settings, registry, children, closed } = parts
  const { agents, runs, continuables, budgets } = children
  return {
    transport: parts.transport,
    lifecycle: parts.lifecycle,
    transportName: settings.transport?.name ?? settings.isolation,
    async ready() {
      if (closed()) throw hostClosed('start more subagents')
      await registry.loading
      if (closed()) throw hostClosed('start more subagents')
    },
    closed,
    globalToolNames: () => [...registry.env.tools.list()].map((t) => t.name),
    publish(mirror: Mirror) {
      agents.set(mirror.id, mirror)
      return new SessionWriter(settings.store, mirror.session.header, mirror.session.events)
    },
    track: (run: DelegationRun) => void runs.set(run.id, run),
    endOrphansOf: parts.endOrphansOf,
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
    store: settings.store,
    persona: settings.persona,
  }
}
