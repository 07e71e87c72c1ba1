/** How a command fails on the terminal: the two errors the cli entry turns into an exit code (shared by every command and the bench). */
/** A bad command line: the caller prints the message and exits 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError'
}

/** A command that could not do its job for a reason its message says whole (Redis unreachable, ...): one line, exit 1, no stack. */
export class CommandFailure extends Error {
  override readonly name = 'CommandFailure'
}
