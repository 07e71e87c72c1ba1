/**
 * What the host offers its agents: the models and tools registered on it, and the agent module's
 * (loaded once, in the background). A name is registered once, on the host or in the module. A
 * child sees what was registered when it was created, on any transport: later registrations are
 * for later children.
 */
import type { AgentEnvironment } from '../../agent/loop.js'
import type { Model } from '../../agent/models/model.js'
import type { AgentHooks, AgentModule } from '../../agent/module.js'
import { loadAgentModule } from '../../agent/module-loader.js'
import { defineTool, toolSourceOf, type ToolDefinition } from '../../agent/tools/tools.js'
import { refuseReservedName } from '../../agent/tools/structured.js'
import type { Budget } from '../driver/budget.js'
import { MeteredModel } from '../../agent/models/metered.js'
import type { Placement } from '../types.js'
import { subagentError } from '../../protocol/errors.js'

export class HostRegistry {
  /** What a top-level agent on this host runs with: the host's and the module's, as they are at each lookup. */
  readonly env: AgentEnvironment
  /** Settles when the agent module is loaded (at once without one); rejects if it failed. */
  readonly loading: Promise<void>
  readonly #models = new Map<string, Model>()
  readonly #tools = new Map<string, ToolDefinition>()
  #module: AgentModule = {}
  /** The module's tools by name, once it is loaded: every child's placement shares the one map. */
  #moduleTools: ReadonlyMap<string, ToolDefinition> = new Map()

  constructor(moduleUrl: URL | undefined, maxParallelToolCalls: number) {
    const hooks: AgentHooks = {}
    this.loading = this.#load(moduleUrl, hooks)
    this.loading.catch(() => {}) // surfaced by every start() and every top-level turn instead
    this.env = {
      models: { get: (name) => this.#models.get(name) ?? this.#module.models?.[name] },
      tools: {
        get: (name) => this.#tools.get(name) ?? this.#moduleTool(name),
        list: () => [...this.#tools.values(), ...(this.#module.tools ?? [])],
      },
      hooks,
      maxParallelToolCalls,
      delegated: false,
      ready: this.loading,
    }
  }

  registerModel(name: string, model: Model): () => void {
    if (typeof name !== 'string' || name === '') throw subagentError('ERR_SUBAGENT_ARGUMENT', 'a model name must be a non-empty string')
    if (typeof model?.stream !== 'function') throw subagentError('ERR_SUBAGENT_ARGUMENT', `model "${name}" must have a stream(request) method`)
    taken('model', name, this.#models.has(name), this.#module.models?.[name] !== undefined)
    this.#models.set(name, model)
    return () => {
      if (this.#models.get(name) === model) this.#models.delete(name)
    }
  }

  registerTool(tool: ToolDefinition): () => void {
    const defined = defineTool(tool)
    refuseReservedName(defined.name, 'host.tools.register')
    taken('tool', defined.name, this.#tools.has(defined.name), this.#moduleTool(defined.name) !== undefined)
    this.#tools.set(defined.name, defined)
    return () => {
      if (this.#tools.get(defined.name) === defined) this.#tools.delete(defined.name)
    }
  }

  /** What a child on a runner may call on the host, as registered now; its host models count against `budget` (the host meters what it serves itself). */
  placement(budget: Budget | undefined): Placement {
    const models = new Map([...this.#models].map(([name, model]) => [name, budget ? new MeteredModel(model, () => budget.meter()) : model]))
    return { models, tools: new Map(this.#tools), moduleTools: this.#moduleTools, refusal: () => budget?.refusal() }
  }

  /**
   * What an inline child runs with: a snapshot of the host's and the module's models and tools.
   * Its budget counts the tokens a failed step's model reported, as the host's meter counts a
   * runner's child's (the steps it records count as they are recorded, on every transport).
   */
  childEnvironment(budget: Budget | undefined): AgentEnvironment {
    const module = this.#module
    const models = new Map([...this.#models, ...Object.entries(module.models ?? {})])
    const env: AgentEnvironment = { ...this.env, models, tools: toolSourceOf(this.#tools.values(), module.tools ?? []) }
    // A module model's tokens are what its records say, on a runner too.
    if (budget) env.unrecorded = (usage, provider) => void (!Object.hasOwn(module.models ?? {}, provider) && budget.unrecorded(usage))
    return env
  }

  #moduleTool(name: string): ToolDefinition | undefined {
    return this.#module.tools?.find((t) => t.name === name)
  }

  async #load(moduleUrl: URL | undefined, hooks: AgentHooks): Promise<void> {
    if (moduleUrl === undefined) return
    const module = await loadAgentModule(moduleUrl)
    for (const name of Object.keys(module.models ?? {})) {
      if (this.#models.has(name)) throw subagentError('ERR_SUBAGENT_DUPLICATE', `model "${name}" is registered on the host and in the agent module: give one of them another name`)
    }
    for (const tool of module.tools ?? []) {
      if (this.#tools.has(tool.name)) throw subagentError('ERR_SUBAGENT_DUPLICATE', `tool "${tool.name}" is registered on the host and in the agent module: give one of them another name`)
    }
    this.#module = module
    this.#moduleTools = new Map((module.tools ?? []).map((tool) => [tool.name, tool]))
    Object.assign(hooks, module.hooks)
  }
}

function taken(kind: 'model' | 'tool', name: string, hostHas: boolean, moduleHas: boolean): void {
  if (hostHas) throw subagentError('ERR_SUBAGENT_DUPLICATE', `${kind} "${name}" is already registered on this host: register each name once, or give this one another name`)
  if (moduleHas) throw subagentError('ERR_SUBAGENT_DUPLICATE', `${kind} "${name}" is already defined by the agent module: give the host ${kind} another name`)
}
