/**
 * Tools: definitions, and the scope an agent sees them through. A scope has two layers: the
 * global tools (host and agent-module tools, read live) and the agent's own tools (which shadow
 * global ones of the same name). `restrict` narrows the global layer; guards are monotonic:
 * once added they stay, and their denial outranks every hook.
 */
import type { ToolFilter } from '../../protocol/shapes/child.js'
import type { ToolErrorCode } from '../../protocol/shapes/session.js'
import type { AgentView } from '../view.js'
import type { ToolSchema } from '../../protocol/shapes/model.js'
import type { Infer } from './infer.js'
import { checkSchemaSubset } from './schema.js'
import { isLibrarySchema, toJsonSchema } from './to-json-schema.js'
import { subagentError } from '../../protocol/errors.js'
import { SECTION_ORDER, type PromptSection } from '../prompt.js'

export interface ToolExecution {
  /** The calling agent (for a host tool called by a worker child: the host's view of it). */
  agent: AgentView
  callId: string
  /** Aborted with the cancel reason when the agent is cancelled. */
  signal: AbortSignal
  /** Ends the turn once this step's tool results are recorded: no further model request. */
  concludeTurn(): void
}

export interface ToolDefinition<Args = Record<string, unknown>> {
  name: string
  description: string
  /** An object-rooted JSON Schema of the supported subset. */
  parameters: object
  execute(args: Args, exec: ToolExecution): unknown
  /** Turns the returned value into the text the model sees; default: strings as-is, else JSON. */
  render?(value: unknown): string
  /** A delegated child can never ask for approval, so such a call is denied there. */
  needsApproval?: boolean
  /** False makes the call run alone: earlier calls of the step finish first, later ones wait. */
  concurrencySafe?: boolean
  /**
   * How to use the tool, as a system prompt section (`tool:<name>`) of every agent that can see
   * it, and only while it can: a tool filter that hides the tool hides its guidance too.
   */
  guidance?: string
}

export type { ToolFilter }

/** A guard returns a denial message, or undefined to let the call through. */
export type ToolGuard = (call: { name: string; callId: string }) => string | undefined

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/

/** A tool as written: `parameters` is a JSON Schema, or a zod 4 or AI SDK schema (converted once, here). */
export interface ToolInput<P, Args> extends Omit<ToolDefinition<Args>, 'parameters'> {
  parameters: P
}

/** The arguments a tool's `parameters` describe; any object when its type says nothing. */
export type ArgsOf<P> = Infer<P, Record<string, unknown>>

/**
 * Checks a tool and returns it with `parameters` as plain JSON Schema (what crosses threads).
 * The arguments' type is inferred from `parameters` (a JSON Schema literal, or a zod 4 schema),
 * unless given: `defineTool<{ n: number }>({ ... })`.
 */
export function defineTool<const P extends object>(definition: ToolInput<P, ArgsOf<P>>): ToolDefinition<ArgsOf<P>>
export function defineTool<Args = Record<string, unknown>>(definition: ToolDefinition<Args>): ToolDefinition<Args>
export function defineTool(definition: ToolInput<object, never>): ToolDefinition<never> {
  if (typeof definition !== 'object' || definition === null) throw subagentError('ERR_SUBAGENT_DEFINITION', 'defineTool needs a tool definition object')
  const { name, description, parameters, execute } = definition
  if (typeof name !== 'string' || !TOOL_NAME.test(name)) {
    throw subagentError('ERR_SUBAGENT_DEFINITION', `tool name ${JSON.stringify(name)} is invalid: use 1-64 letters, digits, "_" or "-"`)
  }
  if (typeof description !== 'string') throw subagentError('ERR_SUBAGENT_DEFINITION', `tool "${name}" needs a string description`)
  if (typeof execute !== 'function') throw subagentError('ERR_SUBAGENT_DEFINITION', `tool "${name}" needs an execute function`)
  if (definition.guidance !== undefined && typeof definition.guidance !== 'string') throw subagentError('ERR_SUBAGENT_DEFINITION', `tool "${name}" guidance must be a string`)
  const what = `tool "${name}" parameters`
  if (isLibrarySchema(parameters)) return { ...definition, parameters: toJsonSchema(parameters, { what }) }
  checkSchemaSubset(parameters, what)
  return definition
}

/** The prompt sections of these tools' guidance, in the order the tools are listed (the band SECTION_ORDER.toolGuidance). */
export function guidanceSections(tools: Iterable<ToolDefinition>): PromptSection[] {
  const sections: PromptSection[] = []
  for (const tool of tools) if (tool.guidance) sections.push({ id: `tool:${tool.name}`, order: SECTION_ORDER.toolGuidance, text: tool.guidance })
  return sections
}

export function toolSchema(tool: ToolDefinition): ToolSchema {
  return { name: tool.name, description: tool.description, parameters: tool.parameters as Record<string, unknown> }
}

/** Marks a ToolError of any copy of this package: one installed twice, or imported by a path. */
const TOOL_ERROR = Symbol.for('subagent-worker.ToolError')

/**
 * Thrown by a tool to give the model an error result with exactly this text (a plain throw is
 * reported as `tool "<name>" failed: <message>`).
 */
export class ToolError extends Error {
  override name = 'ToolError'
  readonly code: ToolErrorCode

  constructor(message: string, code: ToolErrorCode = 'FAILED') {
    super(message)
    this.code = code
    Object.defineProperty(this, TOOL_ERROR, { value: true })
  }

  /**
   * `instanceof ToolError` holds for another copy's ToolError too: a runner loads the package
   * from its bundle, and a module that imports it by a path, or finds another install of it,
   * has its own copy. A subclass's own check is the usual one.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    if (this !== ToolError) return Function.prototype[Symbol.hasInstance].call(this, value)
    return typeof value === 'object' && value !== null && (value as { [TOOL_ERROR]?: unknown })[TOOL_ERROR] === true
  }
}

/** Checks a filter's shape and that each name is a global tool; throws a clear error otherwise. */
export function checkToolFilter(filter: unknown, globalNames: Iterable<string>): ToolFilter {
  if (typeof filter !== 'object' || filter === null || Array.isArray(filter)) {
    throw subagentError('ERR_SUBAGENT_TOOL_FILTER', 'toolFilter must be an object { allow?: string[], deny?: string[] }')
  }
  const known = new Set(globalNames)
  const checked: ToolFilter = {}
  for (const key of ['allow', 'deny'] as const) {
    const names = (filter as ToolFilter)[key]
    if (names === undefined) continue
    if (!Array.isArray(names) || !names.every((n) => typeof n === 'string')) {
      throw subagentError('ERR_SUBAGENT_TOOL_FILTER', `toolFilter.${key} must be an array of tool names`)
    }
    const unknown = names.filter((n) => !known.has(n))
    if (unknown.length > 0) {
      const list = [...known].sort().join(', ') || 'none'
      throw subagentError('ERR_SUBAGENT_UNKNOWN_NAME', `toolFilter.${key} names an unknown global tool: ${unknown.map((n) => `"${n}"`).join(', ')} (global tools: ${list})`)
    }
    checked[key] = [...names]
  }
  return checked
}

/** The global layer, read live: tools registered later are seen by agents already running. */
export interface ToolSource {
  get(name: string): ToolDefinition | undefined
  list(): Iterable<ToolDefinition>
}

/**
 * A fixed source over the host's tools and then the module's, in the order the host lists them:
 * a later tool of a name takes an earlier one's place (a module tool named as a host tool wins).
 * What an inline child and a runner's child run with.
 */
export function toolSourceOf(hostTools: Iterable<ToolDefinition>, moduleTools: Iterable<ToolDefinition>): ToolSource {
  const tools = new Map<string, ToolDefinition>()
  for (const tool of hostTools) tools.set(tool.name, tool)
  for (const tool of moduleTools) tools.set(tool.name, tool)
  return { get: (name) => tools.get(name), list: () => tools.values() }
}

export class ToolScope {
  readonly #global: ToolSource
  readonly #own = new Map<string, ToolDefinition>()
  readonly #guards: ToolGuard[] = []
  #allow: Set<string> | undefined
  #deny: Set<string> | undefined

  constructor(global: ToolSource) {
    this.#global = global
  }

  /** Adds a tool to this agent alone; returns its removal. */
  register(tool: ToolDefinition): () => void {
    if (this.#own.has(tool.name)) throw subagentError('ERR_SUBAGENT_DUPLICATE', `tool "${tool.name}" is already registered on this agent`)
    this.#own.set(tool.name, tool)
    return () => {
      if (this.#own.get(tool.name) === tool) this.#own.delete(tool.name)
    }
  }

  /** Narrows the global layer. Unknown names throw (`unknown global tool`). */
  restrict(filter: ToolFilter): void {
    const checked = checkToolFilter(filter, [...this.#global.list()].map((t) => t.name))
    if (checked.allow) this.#allow = new Set(checked.allow)
    if (checked.deny) this.#deny = new Set(checked.deny)
  }

  guard(guard: ToolGuard): void {
    this.#guards.push(guard)
  }

  denial(call: { name: string; callId: string }): string | undefined {
    for (const guard of this.#guards) {
      const message = guard(call)
      if (message !== undefined) return message
    }
    return undefined
  }

  #visibleGlobal(tool: ToolDefinition): boolean {
    return (!this.#allow || this.#allow.has(tool.name)) && !this.#deny?.has(tool.name)
  }

  /** Tools the model may see and call, own tools first. */
  visible(): ToolDefinition[] {
    const tools = [...this.#own.values()]
    for (const tool of this.#global.list()) {
      if (!this.#own.has(tool.name) && this.#visibleGlobal(tool)) tools.push(tool)
    }
    return tools
  }

  /** The tool a call may execute; filtered tools refuse to execute. */
  resolve(name: string): ToolDefinition | undefined {
    const own = this.#own.get(name)
    if (own) return own
    const tool = this.#global.get(name)
    return tool && this.#visibleGlobal(tool) ? tool : undefined
  }
}
