/**
 * The library's errors: each has a stable `code` (`ERR_SUBAGENT_*`) a caller can branch on, and
 * the texts both ends of a boundary say (a version mismatch, a closed host) are written here once.
 */
import { describeValue } from './values.js'

/**
 * The one error-to-text helper: an error's message, a string as itself, a message-bearing object
 * (an AI SDK error part) by its message, anything else as JSON.
 */
export function messageOf(error: unknown): string {
  try {
    if (error instanceof Error) return error.message
    if (typeof error === 'string') return error
    const message = (error as { message?: unknown } | null)?.message
    return typeof message === 'string' ? message : describeValue(error)
  } catch {
    // A proxy's trap or a `message` getter threw: what reports an error must not throw itself.
    return describeValue(error)
  }
}

/**
 * Every code and the built-in class its errors extend: a caller's mistake in what it passed is a
 * TypeError, as before; anything else an Error. A code never changes once released. The codes
 * under CLASS_CODES belong to a named class (its own constructor, its own fields); the rest are
 * made by `subagentError`.
 */
const KINDS = {
  ERR_SUBAGENT_VERSION: 'error',
  ERR_SUBAGENT_HOST_CLOSED: 'error',
  ERR_SUBAGENT_DEFINITION: 'type',
  ERR_SUBAGENT_TOOL_FILTER: 'type',
  ERR_SUBAGENT_UNKNOWN_NAME: 'error',
  ERR_SUBAGENT_DUPLICATE: 'error',
  ERR_SUBAGENT_MODULE_LOAD: 'error',
  ERR_SUBAGENT_SESSION_ID: 'type',
  ERR_SUBAGENT_STORE: 'error',
  /** A public function or constructor given an argument of the wrong shape (a config, options, a listener). */
  ERR_SUBAGENT_ARGUMENT: 'type',
  /** A subagent start request, or the parent view it names, of the wrong shape. */
  ERR_SUBAGENT_REQUEST: 'type',
  /** AgentOptions (provider, model, maxTokens, subagentDepth) with a wrong value. */
  ERR_SUBAGENT_AGENT_OPTIONS: 'type',
  /** A session header (given to createAgent, or persisted) with a wrong field. */
  ERR_SUBAGENT_HEADER: 'type',
  /** An agent module hook returned something that is not a plain tool result. */
  ERR_SUBAGENT_HOOK_RESULT: 'type',
  /** A provider asked for a feature its capabilities do not have. */
  ERR_SUBAGENT_CAPABILITY: 'type',
  /** A start aborted before its child was published. */
  ERR_SUBAGENT_ABORTED: 'error',
  /** A turn asked of an agent already disposed, or a message sent to a continuable child already disposed. */
  ERR_SUBAGENT_DISPOSED: 'error',
  /** A child's delegation depth would leave the safe-integer range (a RangeError, as CONTRACT.md §1 names it). */
  ERR_SUBAGENT_DEPTH_RANGE: 'range',
  /** A continuable child asked for what it cannot have (an outputSchema). */
  ERR_SUBAGENT_CONTINUABLE: 'type',
  /** Releasing a finished subagent (its dispose) failed. */
  ERR_SUBAGENT_RELEASE: 'error',
  /** The host refused a model request beyond the child's limits. */
  ERR_SUBAGENT_LIMIT: 'error',
  /** Every runner slot and the start queue are full. */
  ERR_SUBAGENT_POOL_FULL: 'error',
  /** A child ended while a call of it was still running. */
  ERR_SUBAGENT_CHILD_ENDED: 'error',
  /** A call on an RPC end already closed. */
  ERR_SUBAGENT_CHANNEL_CLOSED: 'error',
  /** A model endpoint silent past its window: the abort reason of the request it ends. */
  ERR_SUBAGENT_SILENT: 'error',
  /** A model (or an AI SDK model) streamed something malformed, or its stream failed or ended early. */
  ERR_SUBAGENT_MODEL_STREAM: 'error',
  /** A ScriptedModel asked for more responses than its script has. */
  ERR_SUBAGENT_SCRIPT_EXHAUSTED: 'error',
  /** A conversation the AI SDK prompt cannot express. */
  ERR_SUBAGENT_PROMPT: 'error',
  /** A delegation tool that finished without a child (a provider that never started one). */
  ERR_SUBAGENT_NO_CHILD: 'error',
  /** A runner entry loaded outside the thread or process the host starts. */
  ERR_SUBAGENT_ENTRY: 'error',
  /** A command that needs an optional peer package which is not installed. */
  ERR_SUBAGENT_PEER_MISSING: 'error',
  /** A remote link (host to node) that ended, or was let go, before it was done. */
  ERR_SUBAGENT_LINK_ENDED: 'error',
  /** Something a broker delivered (an envelope, a job) that is not of our shape. */
  ERR_SUBAGENT_REMOTE_SHAPE: 'error',
  /** Redis could not be reached, or did not answer in time. */
  ERR_SUBAGENT_UNREACHABLE: 'error',
  /** One remote transport given to a second host. */
  ERR_SUBAGENT_TRANSPORT_REUSED: 'error',
  /** The node that took a child stopped before building it, or Redis lost the child's job. */
  ERR_SUBAGENT_NODE_LOST: 'error',
  /** A start waited placementTimeoutMs on a queue no live node serves. */
  ERR_SUBAGENT_NO_NODE: 'error',
  /** A node had no room for a child placed on it directly: it built nothing, and the host queues the child. */
  ERR_SUBAGENT_NODE_FULL: 'error',
  /** A node asked for an agent module it does not serve. */
  ERR_SUBAGENT_MODULE_NOT_SERVED: 'error',
  // the named classes
  ERR_SUBAGENT_OPTION: 'type',
  ERR_SUBAGENT_SCHEMA: 'type',
  ERR_SUBAGENT_DEPTH: 'error',
  ERR_SUBAGENT_PROTOCOL: 'error',
  ERR_SUBAGENT_SESSION_LIVE: 'error',
  ERR_SUBAGENT_MODEL_ENDPOINT: 'error',
  ERR_SUBAGENT_RUNNER_LOST: 'error',
} as const satisfies Record<`ERR_SUBAGENT_${string}`, 'error' | 'type' | 'range'>

export type SubagentErrorCode = keyof typeof KINDS

/** The codes a named class owns: InvalidOptionError, UnsupportedSchemaError, SubagentDepthError, ProtocolError, SessionLiveError, ModelEndpointError, RunnerLostError. */
type ClassCode =
  | 'ERR_SUBAGENT_OPTION'
  | 'ERR_SUBAGENT_SCHEMA'
  | 'ERR_SUBAGENT_DEPTH'
  | 'ERR_SUBAGENT_PROTOCOL'
  | 'ERR_SUBAGENT_SESSION_LIVE'
  | 'ERR_SUBAGENT_MODEL_ENDPOINT'
  | 'ERR_SUBAGENT_RUNNER_LOST'

/** The codes the factory makes; a class's code comes only with its class, so `instanceof` and `code` agree. */
export type FactoryCode = Exclude<SubagentErrorCode, ClassCode>

/**
 * The base of every error the library makes. Its name stays the built-in's ("Error",
 * "TypeError") unless a named class sets its own: texts and wire errors read as before.
 */
export class SubagentError<C extends SubagentErrorCode = SubagentErrorCode> extends Error {
  readonly code: C

  constructor(code: C, message: string, options?: ErrorOptions) {
    super(message, options)
    this.code = code
  }

  // A TypeError or RangeError kind cannot extend this class (a caller's `instanceof TypeError` must
  // hold), so `instanceof SubagentError` also accepts theirs; a subclass keeps the plain check.
  static override [Symbol.hasInstance](value: unknown): boolean {
    const object = value as object
    if (this.prototype.isPrototypeOf(object)) return true
    return this === SubagentError && (SubagentTypeError.prototype.isPrototypeOf(object) || SubagentRangeError.prototype.isPrototypeOf(object))
  }
}

/** The base of the TypeError kinds: `instanceof TypeError` and `instanceof SubagentError` both hold. */
export class SubagentTypeError<C extends SubagentErrorCode = SubagentErrorCode> extends TypeError {
  readonly code: C

  constructor(code: C, message: string, options?: ErrorOptions) {
    super(message, options)
    this.code = code
  }
}

/** The base of the RangeError kinds: `instanceof RangeError` and `instanceof SubagentError` both hold. */
export class SubagentRangeError<C extends SubagentErrorCode = SubagentErrorCode> extends RangeError {
  readonly code: C

  constructor(code: C, message: string, options?: ErrorOptions) {
    super(message, options)
    this.code = code
  }
}

/** The one factory: the code says which class the error is. */
export function subagentError(code: FactoryCode, message: string, options?: ErrorOptions): SubagentError | SubagentTypeError | SubagentRangeError {
  const kind: 'error' | 'type' | 'range' = KINDS[code]
  if (kind === 'type') return new SubagentTypeError(code, message, options)
  return kind === 'range' ? new SubagentRangeError(code, message, options) : new SubagentError(code, message, options)
}

/** A start on a remote queue no live node serves (CONTRACT.md §10), found after waiting `waitedMs`, past `placementTimeoutMs`. */
export function noNodeServes(queue: string, waitedMs: number, placementTimeoutMs: number): SubagentError {
  return new SubagentError('ERR_SUBAGENT_NO_NODE', `no node serves the queue '${queue}': the child waited ${waitedMs} ms, past placementTimeoutMs (${placementTimeoutMs} ms), and no live worker node takes its jobs (a node of another frame protocol version serves a queue of its own). Start one with \`subagent-worker node --queue ${queue}\` on the same Redis, or check that its nodes reach it`)
}

/** A node that was given a child to build and built nothing within `placementTimeoutMs` (answering its pings all the while). */
export function notBuilt(placementTimeoutMs: number): SubagentError {
  return new SubagentError('ERR_SUBAGENT_NODE_LOST', `the node given the child did not build it within placementTimeoutMs (${placementTimeoutMs} ms), so it was let go there; nothing of it ran, and the start may be tried again`)
}

/**
 * Two ends that speak different frame protocol versions: `theirs` and `ours` name the ends
 * ("the host", "this runner", `node ${id}`), `hint` says so when the fix is the same package.
 */
export function versionMismatchText(theirs: string, theirVersion: unknown, ours: string, ourVersion: number, hint = true): string {
  const text = `${theirs} speaks frame protocol v${String(theirVersion)} but ${ours} speaks v${ourVersion}`
  return hint ? `${text}: both must come from the same version of subagent-worker` : text
}

/** A call on a host already closing; `todo` says what it would have done ("start more subagents"). */
export function hostClosed(todo: string): Error {
  return subagentError('ERR_SUBAGENT_HOST_CLOSED', `the host is closed: create a new host to ${todo}`)
}

/** The diagnostic of a child a host's close ended. */
export const CLOSED_BEFORE_END = 'the host was closed before the child finished'

/** A start a host's close overtook before it had a runner; `where` it waited: "for a slot", "in the queue". */
export function closedWhileWaiting(where: string): Error {
  return subagentError('ERR_SUBAGENT_HOST_CLOSED', `the host was closed while the child waited ${where}`)
}
