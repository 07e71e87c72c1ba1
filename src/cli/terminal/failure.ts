/** How a command fails on the terminal: the two errors the cli entry turns into an exit code (shared by every command and the bench). */
/** A bad command line: the caller prints the message and exits 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError'
}

/** A command that could not do its job for a reason its message says whole (Redis unreachable, ...): one line, exit 1, no stack. */
export class CommandFailure extends Error {
  override readonly name = 'CommandFailure'
}

/** The library's error code of `error`, if it is one of its errors (a code says what went wrong and what to do: no stack). */
export function codeOf(error: unknown): string | undefined {
  const code = error instanceof Error ? (error as { code?: unknown }).code : undefined
  return typeof code === 'string' && code.startsWith('ERR_SUBAGENT_') ? code : undefined
}
