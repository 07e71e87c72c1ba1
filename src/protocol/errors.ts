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
  if (error instanceof Error) return error.message
  if (typeof error === 'string') return error
  const message = (error as { message?: unknown } | null)?.message
  return typeof message === 'string' ? message : describeValue(error)
}

/**
 * Every code made here and the built-in class its errors extend: a caller's mistake in what it
 * passed is a TypeError, as before; anything else an Error. A code never changes once released.
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
  ERR_SUBAGENT_DISPOSED: 'error',
  ERR_SUBAGENT_CONTINUABLE: 'type',
} as const satisfies Record<`ERR_SUBAGENT_${string}`, 'error' | 'type'>

export type SubagentErrorCode = keyof typeof KINDS

// The name stays the built-in's ("Error", "TypeError"): texts and wire errors read as before.
export class SubagentError extends Error {
  constructor(
    readonly code: SubagentErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options)
  }
}

export class SubagentTypeError extends TypeError {
  constructor(
    readonly code: SubagentErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options)
  }
}

/** The one factory: the code says which class the error is. */
export function subagentError(code: SubagentErrorCode, message: string, options?: ErrorOptions): SubagentError | SubagentTypeError {
  return KINDS[code] === 'type' ? new SubagentTypeError(code, message, options) : new SubagentError(code, message, options)
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
