/**
 * How a failed call to a model endpoint is told, shared by every model adapter: which statuses
 * are worth another attempt, what the endpoint asked to wait, the network cause under an error,
 * and the sentences a diagnostic carries. Nothing here knows an SDK.
 */
import { SubagentError } from '../../protocol/errors.js'

export class ModelEndpointError extends SubagentError<'ERR_SUBAGENT_MODEL_ENDPOINT'> {
  /** The HTTP status the endpoint answered with, when it answered with one. */
  readonly status: number | undefined

  constructor(message: string, options: { status?: number; cause?: unknown } = {}) {
    super('ERR_SUBAGENT_MODEL_ENDPOINT', message, { cause: options.cause })
    this.name = 'ModelEndpointError'
    this.status = options.status
  }
}

/** A timeout, a conflict, a rate limit or a server error: another attempt may succeed. */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 429 || status >= 500
}

/** Longer waits than this are not honoured: the backoff's own delay is used instead. */
const MAX_RETRY_AFTER_MS = 60_000

/** `retry-after-ms`, or `retry-after` in seconds or as an HTTP date, in ms; undefined when absent, unreadable or over a minute. */
export function retryAfterOf(header: (name: string) => string | null | undefined): number | undefined {
  const ms = Number.parseFloat(header('retry-after-ms') ?? '')
  if (Number.isFinite(ms)) return within(ms)
  const after = header('retry-after')
  if (!after) return undefined
  const seconds = Number.parseFloat(after)
  if (Number.isFinite(seconds)) return within(seconds * 1000)
  const date = Date.parse(after)
  return Number.isFinite(date) ? within(date - Date.now()) : undefined
}

function within(ms: number): number | undefined {
  return ms >= 0 && ms <= MAX_RETRY_AFTER_MS ? ms : undefined
}

/** A network failure: its code (ECONNREFUSED, UND_ERR_SOCKET, ...) and how a diagnostic says it. */
export interface NetworkCause {
  code: string
  text: string
}

/** A system error code (ECONNRESET, EAI_AGAIN) or undici's (UND_ERR_SOCKET), never Node's own ERR_* (a bug, not the network). */
const NETWORK_CODE = /^(E(?!RR_)[A-Z]{2,}(_[A-Z]+)?|UND_ERR_[A-Z_]+)$/

/** The first system or undici error code in the error's cause chain, when there is one. */
export function networkCauseOf(error: unknown): NetworkCause | undefined {
  for (let at: unknown = error, depth = 0; typeof at === 'object' && at !== null && depth < 8; depth++) {
    const { code, message, cause, errors } = at as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown }
    if (typeof code === 'string' && NETWORK_CODE.test(code)) {
      const said = typeof message === 'string' && message !== '' && !message.includes(code) ? `: ${message.slice(0, 120)}` : ''
      return { code, text: `${code}${said}` }
    }
    at = cause ?? (Array.isArray(errors) ? errors[0] : undefined)
  }
  return undefined
}

/** Codes of a connection that never opened (as opposed to one closed under the request). */
const NEVER_CONNECTED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'UND_ERR_CONNECT_TIMEOUT'])

/**
 * A lost connection, said by when it was lost: before connecting, after connecting but before any
 * answer, or mid-stream once part of the answer had reached the child (never retried then).
 */
export function lostConnection(url: string | undefined, cause: NetworkCause, started: boolean): string {
  const endpoint = url === undefined ? 'the model endpoint' : `the model endpoint ${url}`
  if (started) return `the model endpoint's stream was cut after part of the answer had reached the child (${cause.text}), so the request was not retried`
  if (NEVER_CONNECTED.has(cause.code)) return `could not reach ${endpoint}: ${cause.text}`
  return `${endpoint} closed the connection before answering (${cause.text})`
}

/** `HTTP 429: <the provider's message>`, the message shortened and with anything that looks like a key masked. */
export function answeredWith(status: number, message: unknown): string {
  const said = providerMessage(message)
  return `the model endpoint answered HTTP ${status}${said ? `: ${said}` : ''}`
}

/** Error bodies may echo a key back, and this text ends up in diagnostics. */
export function providerMessage(message: unknown): string | undefined {
  if (typeof message !== 'string') return undefined
  const masked = message
    .replace(/\b(sk|pk|rk|key|api[-_]?key)[-_][\w-]{6,}/gi, '[redacted]')
    .replace(/\b(?=[\w-]*\d)[A-Za-z0-9_-]{32,}\b/g, '[redacted]')
    .replace(/\s+/g, ' ')
    .trim()
  if (masked === '') return undefined
  return masked.length > 300 ? `${masked.slice(0, 300)}...` : masked
}

/** An endpoint's address as diagnostics show it: no query string, no credentials. */
export function addressOf(url: string): string {
  try {
    const parsed = new URL(url)
    return `${parsed.origin}${parsed.pathname}`
  } catch {
    return '(an address that is not a URL)'
  }
}
