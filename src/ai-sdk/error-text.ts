/** The text of anything thrown or reported as an error, for messages that say why. */
export function describeError(error: unknown): string {
  if (error instanceof Error) return error.message
  if (typeof error === 'string') return error
  if (typeof error === 'object' && error !== null && typeof (error as { message?: unknown }).message === 'string') return (error as { message: string }).message
  try {
    return JSON.stringify(error) ?? String(error)
  } catch {
    return String(error)
  }
}
