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

/** The codes of errors made here; a code never changes once released. */
export type SubagentErrorCode = 'ERR_SUBAGENT_VERSION' | 'ERR_SUBAGENT_HOST_CLOSED'

export class SubagentError extends Error {
  override name = 'SubagentError'

  constructor(
    readonly code: SubagentErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options)
  }
}

/** The one factory: every error made here names its code. */
export function subagentError(code: SubagentErrorCode, message: string, options?: ErrorOptions): SubagentError {
  return new SubagentError(code, message, options)
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
export function hostClosed(todo: string): SubagentError {
  return subagentError('ERR_SUBAGENT_HOST_CLOSED', `the host is closed: create a new host to ${todo}`)
}

/** The diagnostic of a child a host's close ended. */
export const CLOSED_BEFORE_END = 'the host was closed before the child finished'

/** A start a host's close overtook before it had a runner; `where` it waited: "for a slot", "in the queue". */
export function closedWhileWaiting(where: string): SubagentError {
  return subagentError('ERR_SUBAGENT_HOST_CLOSED', `the host was closed while the child waited ${where}`)
}
