/**
 * The host's top-level agents: those `createAgent` makes and `resumeAgent` rebuilds from the
 * store, whose loops run in the host's thread. Each is the root of its delegation tree's budget
 * and the one writer of its transcript.
 */
import { DELEGATION_SCOPE } from '../../agent/child.js'
import { AgentRuntime, type AgentEnvironment } from '../../agent/loop.js'
import { SECTION_ORDER } from '../../agent/prompt.js'
import type { Agent, AgentOptions, AgentView } from '../../agent/view.js'
import type { SessionEvent, SessionHeader } from '../../protocol/shapes/session.js'
import { Budget } from '../driver/budget.js'
import type { LimitReason } from '../../agent/limit-stop.js'
import { checkLimits, spentInTree, type ChildLimits } from '../driver/limits.js'
import { checkSessionId, newSessionId, SessionWriter, type SessionStore } from '../driver/stores/store.js'
import { checkAgentOptions, isNonNegativeSafeInteger } from '../options.js'
import { hostClosed, subagentError } from '../../protocol/errors.js'

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

/** What the top-level agents share with the rest of the host. */
export interface TopLevelContext {
  store: SessionStore
  env: AgentEnvironment
  /** The deployment persona: a top-level agent's own. */
  persona: string | undefined
  /** Ends what an agent started that only it could reach (its background jobs, its continuable children) when it is disposed. */
  endOrphansOf(owner: string): Promise<void>
  /** Every live agent of the host, by id: top-level ones are published here too. */
  agents: Map<string, AgentView>
  budgets: Map<string, Budget>
  closed(): boolean
}

export class TopLevelAgents {
  readonly #context: TopLevelContext
  readonly #live = new Map<string, { agent: AgentRuntime; writer: SessionWriter }>()

  constructor(context: TopLevelContext) {
    this.#context = context
  }

  get(id: string): AgentRuntime | undefined {
    return this.#live.get(id)?.agent
  }

  create(init: AgentInit): Agent {
    const { agents } = this.#context
    if (this.#context.closed()) throw hostClosed('create agents')
    const id = init.id === undefined ? newSessionId() : checkSessionId(init.id)
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
    return this.#adopt(header, agentOptions)
  }

  async resume(id: string, resumeOptions: AgentOptions): Promise<Agent> {
    const { store, agents, closed } = this.#context
    if (closed()) throw hostClosed('resume agents')
    checkSessionId(id)
    // Refused before the store is read or its transcript claimed.
    const given = checkAgentOptions(resumeOptions, 'resume options')
    const live = () => subagentError('ERR_SUBAGENT_DUPLICATE', `agent "${id}" is already live on this host: dispose() it first to resume it from the store`)
    if (agents.has(id)) throw live()
    const stored = await store.read(id)
    if (!stored) throw subagentError('ERR_SUBAGENT_UNKNOWN_NAME', `no session "${id}" in the store: resume an id the store lists (store.list()), or createAgent() to start a new one`)
    if (closed()) throw hostClosed('resume agents')
    if (agents.has(id)) throw live()
    // Claims the transcript before anything runs: a second live writer is refused here, not at the first write.
    await store.append(id, [])
    // The header keeps the agent's model: options given here override it.
    const { provider, model } = stored.header
    const options = { ...(provider === undefined ? {} : { provider }), ...(model === undefined ? {} : { model }), ...given }
    const spent = stored.header.limits?.maxTotalTokens === undefined ? 0 : await spentInTree(store, stored.header, stored.events)
    return this.#adopt(stored.header, options, stored.events, spent)
  }

  /** The host is closing: every turn is cancelled and awaited, and every budget ends (its deadline with it). */
  async stop(): Promise<void> {
    const live = [...this.#live.values()]
    for (const { agent } of live) agent.cancel({ kind: 'host-closed' })
    await Promise.allSettled(live.map(({ agent }) => agent.whenIdle()))
    for (const id of this.#live.keys()) this.#context.budgets.get(id)?.end()
  }

  /** Stores what is left of every transcript; throws when some could not be. */
  async flush(): Promise<void> {
    const flushed = await Promise.allSettled([...this.#live.values()].map(({ writer }) => writer.close()))
    const failures = flushed.flatMap((r) => (r.status === 'rejected' ? [r.reason] : []))
    if (failures.length > 0) throw new AggregateError(failures, 'the host closed, but some transcripts could not be stored')
  }

  /** Registers a top-level agent whose loop runs in this thread; `events` resume a stored one. */
  #adopt(header: SessionHeader, agentOptions: AgentOptions, events?: SessionEvent[], spentBefore = 0): Agent {
    const { store, env, persona, endOrphansOf, agents, budgets } = this.#context
    const { id } = header
    // The root of its delegation tree's budget (CONTRACT.md §11): its children inherit what it has left.
    const budget = new Budget(undefined, header.limits ?? {}, spentBefore)
    // A resumed subagent is still delegated: it can ask nobody for approval and keeps its scope.
    const delegated = header.origin === 'subagent'
    const writer = new SessionWriter(store, header, [], events !== undefined)
    // Disposing it unregisters it; its transcript stays in the store, complete.
    const release = async () => {
      await endOrphansOf(id) // nobody could collect its background jobs or message its continuable children once it is gone
      if (agents.get(id) === agent) agents.delete(id)
      if (this.#live.get(id)?.agent === agent) this.#live.delete(id)
      if (budgets.get(id) === budget) budgets.delete(id)
      budget.end()
      await writer.close()
    }
    const agent: AgentRuntime = new AgentRuntime({ id, options: agentOptions, header, ...(events ? { seed: events } : {}), release }, { ...env, delegated, admit: () => budget.refusal() })
    if (persona !== undefined) agent.prompt.set({ id: 'persona', order: SECTION_ORDER.persona, text: persona })
    if (delegated) agent.prompt.set({ id: 'delegation-scope', order: SECTION_ORDER.delegationScope, text: DELEGATION_SCOPE })
    const owner = { stop: (reason: LimitReason) => agent.cancel(reason) }
    // A resumed continuable child goes on as it was: its deadline and steps count per turn, each
    // turn an activation (CONTRACT.md §13), and nothing runs while it is idle. Any other agent's
    // deadline counts from its creation or resume.
    const perTurn = events?.some((event) => event.type === 'subagent/descriptor' && event.data.mode === 'continuable') ?? false
    agent.session.onAppend((event) => {
      writer.append(event)
      budget.observe(event)
      if (perTurn && event.type === 'turn/start') budget.begin(owner, { unref: true })
      else if (perTurn && event.type === 'turn/end') budget.pause()
    })
    budgets.set(id, budget)
    if (!perTurn) budget.begin(owner, { unref: true })
    agents.set(id, agent)
    this.#live.set(id, { agent, writer })
    return agent
  }
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
