/** Result extraction (CONTRACT.md §3): only the child's own events, never the fork seed. */
import { asLimitReason, limitDiagnostic } from '../../agent/limit-stop.js'
import { readTurns, stopReasonOf } from '../../agent/outcome.js'
import type { SessionEvent, TurnEndReason } from '../../protocol/shapes/session.js'
import type { ChildOutcome } from '../transport.js'
import type { SubagentResult, SubagentStopReason } from '../types.js'

const DIAGNOSTIC_LIMIT_BYTES = 4096
const TRUNCATION_MARK = '\n[diagnostic truncated]'

export interface ExtractionContext {
  seedLength: number
  cancelled: boolean
  structuredRequested: boolean
  maxTokens?: number
}

export function extractResult(events: readonly SessionEvent[], outcome: ChildOutcome, context: ExtractionContext): SubagentResult {
  const { output, end, usage } = readTurns(events, context.seedLength)
  const used = usage ? { usage } : {}

  if (outcome.structured) return { output, structured: outcome.structured.value, ...used, stopReason: 'completed' }

  let stopReason: SubagentStopReason = stopReasonOf(end)
  let diagnostic = diagnosticOf(end, context)
  if (outcome.fault) {
    stopReason = outcome.fault.stopReason
    diagnostic = outcome.fault.diagnostic
  }
  if (context.structuredRequested && stopReason === 'completed') {
    stopReason = 'error'
    diagnostic = 'the child finished its turn without reporting a result through structured_output'
  }
  if (context.cancelled && stopReason !== 'completed') stopReason = 'aborted'
  const result: SubagentResult = { output, ...used, stopReason }
  if (diagnostic !== undefined && stopReason !== 'completed') result.diagnostic = diagnosticText(diagnostic)
  return result
}

function diagnosticOf(end: TurnEndReason | undefined, context: ExtractionContext): string | undefined {
  switch (end?.kind) {
    case undefined:
      return 'the child ended without finishing its turn'
    case 'max-tokens':
      return context.maxTokens === undefined
        ? 'the child hit its output token limit'
        : `the child hit its output token limit (maxTokens ${context.maxTokens})`
    case 'blocked':
    case 'error':
      return end.message
    case 'aborted': {
      const limit = asLimitReason(end.reason)
      return limit ? limitDiagnostic(limit) : undefined
    }
    default:
      return undefined
  }
}

const CREDENTIAL_TOKEN = /\b(?:sk|pk|rk|ghp|gho|ghs|xox[abprs])[-_][A-Za-z0-9_-]{8,}|\bBearer\s+[A-Za-z0-9._~+/-]{8,}=*/g
const CREDENTIAL_FIELD = /\b(api[-_]?key|access[-_]?token|token|secret|password|authorization)(["']?\s*[:=]\s*["']?)[^\s"',;]+/gi
/** A URL's user and password (`https://user:pass@host`), which an error quoting the URL repeats. */
const URL_CREDENTIALS = /\b([a-z][a-z\d+.-]*:\/\/)[^\s/?#@]+@/gi

/** A diagnostic as anyone may read it: credentials and environment values blanked, at most 4096 bytes. */
export function diagnosticText(text: string): string {
  return truncateDiagnostic(redactDiagnostic(text))
}

/**
 * Diagnostics may quote an error message (a model's, a crashed worker's), which is not ours to
 * trust: values of the process environment and credential-shaped text are blanked out.
 */
function redactDiagnostic(text: string): string {
  let redacted = text.replace(CREDENTIAL_TOKEN, '[redacted]').replace(CREDENTIAL_FIELD, '$1$2[redacted]').replace(URL_CREDENTIALS, '$1[redacted]@')
  for (const value of Object.values(process.env)) {
    if (value && value.length >= 8 && redacted.includes(value)) redacted = redacted.split(value).join('[redacted]')
  }
  return redacted
}

/** At most 4096 UTF-8 bytes, cut on a character boundary, marked when cut. */
export function truncateDiagnostic(text: string): string {
  if (Buffer.byteLength(text, 'utf8') <= DIAGNOSTIC_LIMIT_BYTES) return text
  const budget = DIAGNOSTIC_LIMIT_BYTES - Buffer.byteLength(TRUNCATION_MARK, 'utf8')
  let bytes = 0
  let cut = 0
  for (const char of text) {
    const size = Buffer.byteLength(char, 'utf8')
    if (bytes + size > budget) break
    bytes += size
    cut += char.length
  }
  return text.slice(0, cut) + TRUNCATION_MARK
}
