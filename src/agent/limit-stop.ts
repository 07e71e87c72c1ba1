/** A turn cut short by a limit (CONTRACT.md §11): its reason and its diagnostic, on either side of a boundary. */
import type { TurnEndReason } from '../protocol/shapes/session.js'

export type LimitName = 'timeoutMs' | 'maxSteps' | 'maxTotalTokens'

/** The reason an aborted `turn/end` records when a limit stopped the turn. */
export interface LimitReason {
  kind: 'limit'
  limit: LimitName
  value: number
}

const UNITS: Record<LimitName, string> = { timeoutMs: 'ms', maxSteps: 'steps', maxTotalTokens: 'tokens' }

export function limitReason(limit: LimitName, value: number): LimitReason {
  return { kind: 'limit', limit, value }
}

export function limitStop(limit: LimitName, value: number): TurnEndReason {
  return { kind: 'aborted', reason: limitReason(limit, value) }
}

/** The reason as a limit stop, when it is one (it may come from a runner: its shape is checked). */
export function asLimitReason(reason: unknown): LimitReason | undefined {
  if (typeof reason !== 'object' || reason === null) return undefined
  const { kind, limit, value } = reason as Partial<LimitReason>
  if (kind !== 'limit' || typeof limit !== 'string' || !Object.hasOwn(UNITS, limit) || !Number.isSafeInteger(value)) return undefined
  return { kind, limit, value: value as number }
}

/** The diagnostic of a limit stop, exactly CONTRACT.md §11's. */
export function limitDiagnostic({ limit, value }: LimitReason): string {
  return `the child exceeded limits.${limit} (${value} ${UNITS[limit]})`
}
