/**
 * A start request, checked and normalized once, in the contract's order (CONTRACT.md §1), as
 * host/settings.ts does the host's options: what the provider builds a child from is this, never
 * the raw request. The child's options are merged from the parent's and the request's, then pass
 * the one AgentOptions check (options.ts); its persona is resolved here, on the host, so a runner
 * is told only the one it is to use.
 */
import { toContent } from '../../agent/loop.js'
import { toJsonSchema, type JsonSchema } from '../../agent/tools/to-json-schema.js'
import { checkToolFilter, type ToolFilter } from '../../agent/tools/tools.js'
import type { AgentOptions, AgentView } from '../../agent/view.js'
import type { ContentBlock } from '../../protocol/shapes/content.js'
import type { ChildMode, SessionEvent } from '../../protocol/shapes/session.js'
import { isContentBlock, isSessionEvent } from '../../protocol/validators.js'
import { subagentError } from '../../protocol/errors.js'
import { checkAgentOptions, checkAgentOptionValues, InvalidOptionError } from '../options.js'
import { checkMaxDepth, childDepthOf } from './depth.js'
import { checkLimits, type ChildLimits } from './limits.js'
import type { SubagentStartRequest } from '../types.js'

const PRE_PUBLICATION_ABORT = 'subagent request was aborted before child publication'
const INHERITED = "the child's options (inherited from the parent unless agentOptions overrides them)"
/** What a child inherits of its parent's options unless agentOptions overrides it; its depth is the host's to say. */
const INHERITED_KEYS = ['provider', 'model', 'maxTokens'] as const

export function abortedBeforePublication(signal: AbortSignal): Error {
  return subagentError('ERR_SUBAGENT_ABORTED', PRE_PUBLICATION_ABORT, { cause: signal.reason })
}

/** What a child is started from: every part of the request checked, the child's options merged. */
export interface StartRequest {
  readonly mode: ChildMode
  /** A fork, seeded with the parent's completed turns; else a spawn. */
  readonly fork: boolean
  readonly signal: AbortSignal
  readonly parent: AgentView
  readonly prompt: ContentBlock[]
  readonly depth: number
  /** Merged and checked: the parent's provider, model and maxTokens unless overridden, and the child's depth. */
  readonly options: AgentOptions
  readonly label: string | undefined
  /** The request's persona, else the host's: the one the child is told. */
  readonly persona: string | undefined
  readonly limits: ChildLimits | undefined
  readonly outputSchema: JsonSchema | undefined
  readonly toolFilter: ToolFilter | undefined
  /** The parent's completed turns, copied (fork), or none (spawn). */
  readonly seed: SessionEvent[]
  readonly cwd: string | undefined
}

/** What checking a request needs of the host. */
export interface RequestContext {
  readonly mode: ChildMode
  readonly fork: boolean
  /** The deployment persona, which a child without its own is given. */
  readonly persona: string | undefined
  /** Settles when the agent module is loaded: its tools are among the names a toolFilter may use. */
  ready(): Promise<void>
  globalToolNames(): string[]
}

/**
 * Checks `request` in the contract's order (maxDepth, an aborted signal, depth, outputSchema,
 * toolFilter, then the child's options) and normalizes it; every refusal happens before any
 * child exists.
 */
export async function startRequestOf(request: SubagentStartRequest, context: RequestContext): Promise<StartRequest> {
  const checked = checkedNow(request, context)
  await context.ready()
  if (checked.signal.aborted) throw abortedBeforePublication(checked.signal)
  const toolFilter = request.toolFilter === undefined ? undefined : checkToolFilter(request.toolFilter, context.globalToolNames())
  const seed = context.fork ? forkSeed(checked.parent) : []
  const options = childOptionsOf(request.agentOptions, checked.parent, checked.depth)
  const { cwd } = checked.parent.session.header
  if (cwd !== undefined && typeof cwd !== 'string') throw subagentError('ERR_SUBAGENT_REQUEST', 'subagent parent session.header.cwd must be a string')
  return { ...checked, toolFilter, seed, options, cwd }
}

/** Everything that can be checked before the agent module is loaded. */
function checkedNow(request: SubagentStartRequest, context: RequestContext): Omit<StartRequest, 'toolFilter' | 'options' | 'cwd' | 'seed'> {
  if (typeof request !== 'object' || request === null) throw subagentError('ERR_SUBAGENT_REQUEST', 'subagent start needs a request object')
  if (context.mode === 'continuable' && request.outputSchema !== undefined) {
    throw subagentError('ERR_SUBAGENT_CONTINUABLE', 'a continuable child takes no outputSchema: each activation ends in text; use start() or run() for a structured result')
  }
  if (request.signal !== undefined && !(request.signal instanceof AbortSignal)) throw subagentError('ERR_SUBAGENT_REQUEST', 'subagent request signal must be an AbortSignal when given')
  // Without one the run is cancelled only by dispose() or host.close(): a signal of its own that never aborts.
  const signal = request.signal ?? new AbortController().signal
  const maxDepth = checkMaxDepth(request.maxDepth)
  if (signal.aborted) throw abortedBeforePublication(signal)
  const { parent } = request
  checkParent(parent)
  for (const key of ['label', 'persona'] as const) {
    if (request[key] !== undefined && typeof request[key] !== 'string') throw subagentError('ERR_SUBAGENT_REQUEST', `subagent request ${key} must be a string`)
  }
  const limits = checkLimits(request.limits)
  const depth = childDepthOf(parent, maxDepth)
  const outputSchema = request.outputSchema === undefined ? undefined : toJsonSchema(request.outputSchema, { what: 'outputSchema' })
  const prompt = promptOf(request.prompt)
  const { mode, fork } = context
  return { mode, fork, signal, parent, prompt, depth, label: request.label, persona: request.persona ?? context.persona, limits, outputSchema }
}

/**
 * The child's options, merged and then checked once: a value the request gave is named as
 * `agentOptions.<key>`, an inherited one as the child's. The request's own subagentDepth is
 * checked too, though the child's depth replaces it.
 */
function childOptionsOf(given: unknown, parent: AgentView, depth: number): AgentOptions {
  // Not an object: refused (this throws) as the request's, before anything is merged.
  if (given !== undefined && (typeof given !== 'object' || given === null || Array.isArray(given))) return checkAgentOptions(given, 'agentOptions')
  const override = (given ?? {}) as Record<string, unknown>
  const merged: Record<string, unknown> = { subagentDepth: override.subagentDepth !== undefined ? override.subagentDepth : depth }
  for (const key of INHERITED_KEYS) {
    const value = override[key] !== undefined ? override[key] : parent.options[key]
    if (value !== undefined) merged[key] = value
  }
  checkAgentOptionValues(merged, (key) => (override[key] !== undefined ? 'agentOptions' : INHERITED))
  const options: AgentOptions = {}
  for (const key of INHERITED_KEYS) if (merged[key] !== undefined) (options as Record<string, unknown>)[key] = merged[key]
  options.subagentDepth = depth
  return options
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
    // The child's own events are numbered on from the seed's (CONTRACT.md §12: read in seq order, from any seq).
    if (event.seq !== index) {
      throw subagentError('ERR_SUBAGENT_REQUEST', `parent session event ${index} has seq ${event.seq}: a forked seed must be numbered 0, 1, 2, ... in order, since the child numbers its own events on from it`)
    }
  }
  try {
    return structuredClone(seed)
  } catch (error) {
    throw subagentError('ERR_SUBAGENT_REQUEST', `parent session events must be plain data to be forked: ${(error as Error).message}`)
  }
}
