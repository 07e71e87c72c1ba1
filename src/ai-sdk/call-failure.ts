/**
 * What a failed AI SDK model call says, for the shared request policy (agent/models/retry.ts). Providers
 * report an HTTP failure as an `APICallError` (`statusCode`, `responseHeaders`, the provider's
 * message, and the URL), a connection that failed before an answer as an `APICallError` without
 * a status, and a stream cut under them as an `APICallError` of status 200 (or whatever the fetch
 * threw) over the network error. `@ai-sdk/provider` is never
 * imported: the error is read by its shape, wherever it sits in the cause chain.
 */
import { addressOf, answeredWith, isRetryableStatus, lostConnection, networkCauseOf, retryAfterOf } from '../agent/models/endpoint-failure.js'
import type { AttemptState, Failure } from '../agent/models/retry.js'

interface CallErrorLike {
  message: string
  url: string
  statusCode?: number
  responseHeaders?: Record<string, string>
  isRetryable?: boolean
}

/** `name` names the model (`AI SDK model openai/gpt-4o`) at the head of every message. */
export function judgeCallFailure(error: unknown, { started }: AttemptState, name: string): Failure | undefined {
  const call = callErrorIn(error)
  const status = call?.statusCode
  // A 2xx status here is a successful answer whose body failed under the provider (a cut stream).
  if (status !== undefined && !isSuccess(status)) {
    const retryAfterMs = retryAfterOf((header) => headerOf(call?.responseHeaders, header))
    return { message: `${name}: ${answeredWith(status, call?.message)}`, retryable: isRetryableStatus(status), status, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) }
  }
  const address = call ? addressOf(call.url) : undefined
  const lost = networkCauseOf(error)
  if (lost) return { message: `${name}: ${lostConnection(address, lost, started)}`, retryable: true }
  if (call && status === undefined) return { message: `${name}: could not reach the model endpoint ${address}: ${call.message}`, retryable: call.isRetryable !== false }
  return undefined
}

function isSuccess(status: number): boolean {
  return status >= 200 && status < 300
}

function callErrorIn(error: unknown): CallErrorLike | undefined {
  for (let at: unknown = error, depth = 0; typeof at === 'object' && at !== null && depth < 8; depth++, at = (at as { cause?: unknown }).cause) {
    const { name, url, message, statusCode } = at as Record<string, unknown>
    if (name === 'AI_APICallError' && typeof url === 'string' && typeof message === 'string' && (statusCode === undefined || Number.isSafeInteger(statusCode))) return at as CallErrorLike
  }
  return undefined
}

/** Response headers as the AI SDK records them: a plain object, its names in any case. */
function headerOf(headers: Record<string, string> | undefined, name: string): string | undefined {
  if (typeof headers !== 'object' || headers === null) return undefined
  for (const [key, value] of Object.entries(headers)) if (key.toLowerCase() === name && typeof value === 'string') return value
  return undefined
}
