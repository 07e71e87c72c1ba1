/**
 * Limits (CONTRACT.md §11): checking them up front, and narrowing them as they are inherited.
 * Enforcement lives in budget.ts (the host's tree of what each child may still spend).
 */
import { limitReason, type LimitName, type LimitReason } from '../../agent/limit-stop.js'
import type { AgentView } from '../../agent/view.js'
import type { ChildLimits, SessionEvent, SessionHeader } from '../../protocol/shapes/session.js'
import { messageOf, subagentError } from '../../protocol/errors.js'
import type { SessionStore } from './stores/store.js'
import { InvalidOptionError } from '../options.js'

export type { ChildLimits }

export const LIMIT_NAMES = ['timeoutMs', 'maxSteps', 'maxTotalTokens'] as const satisfies readonly LimitName[]

/** Validates `limits` (undefined when not given); errors name the option (`limits.timeoutMs`, ...). */
export function checkLimits(limits: unknown): ChildLimits | undefined {
  const what = 'limits'
  if (limits === undefined) return undefined
  if (typeof limits !== 'object' || limits === null || Array.isArray(limits)) throw new InvalidOptionError(what, limits, 'an object { timeoutMs?, maxSteps?, maxTotalTokens? }')
  const checked: ChildLimits = {}
  for (const key of Object.keys(limits)) {
    if (!(LIMIT_NAMES as readonly string[]).includes(key)) throw new InvalidOptionError(`${what}.${key}`, (limits as Record<string, unknown>)[key], `a known limit (an unknown key: the limits are ${LIMIT_NAMES.join(', ')})`)
  }
  for (const name of LIMIT_NAMES) {
    const value = (limits as Record<string, unknown>)[name]
    if (value === undefined) continue
    if (!Number.isSafeInteger(value) || (value as number) < 1) throw new InvalidOptionError(`${what}.${name}`, value, 'a positive safe integer')
    checked[name] = value as number
  }
  return checked
}

/** The smallest of each limit any of these gives: a child's limits never widen its parent's. */
export function narrowest(...sources: Array<ChildLimits | undefined>): ChildLimits {
  const out: ChildLimits = {}
  for (const source of sources) {
    for (const name of LIMIT_NAMES) {
      const value = source?.[name]
      if (value !== undefined && (out[name] === undefined || value < out[name])) out[name] = value
    }
  }
  return out
}

/**
 * The tokens a stored agent and its descendants spent (their sessions' recorded usage): what a
 * resumed agent's budget has already used. A fork seed is the parent's, not the agent's.
 */
export async function spentInTree(store: SessionStore, header: SessionHeader, events: readonly SessionEvent[]): Promise<number> {
  let spent = 0
  for (const event of events.slice(header.seedLength ?? 0)) {
    const usage = event.type === 'assistant/message' ? event.data.usage : undefined
    if (usage) spent += Math.max(0, usage.inputTokens) + Math.max(0, usage.outputTokens)
  }
  const { sessions } = await store.list({ parentSession: header.id })
  for (const child of sessions) {
    if (child.id === header.id) continue
    const stored = await store.read(child.id)
    if (stored) spent += await spentInTree(store, stored.header, stored.events)
  }
  return spent
}

/**
 * What a parent that is not live on this host has left, by its session header's `limits` (an
 * agent of another host, a stored session passed as a view): the header's step bound and
 * deadline, and its token budget less what its tree recorded (its own events, its descendants'
 * stored sessions). A live parent's budget knows more (a running deadline, tokens served but not
 * yet recorded) and is used instead. Malformed stored limits are refused, as a malformed stored
 * depth is.
 */
export async function leftOfView(store: SessionStore, parent: AgentView): Promise<{ limits: ChildLimits; spent?: LimitReason } | undefined> {
  const { header, events } = parent.session
  let recorded: ChildLimits | undefined
  try {
    recorded = checkLimits(header.limits)
  } catch (error) {
    throw subagentError('ERR_SUBAGENT_HEADER', `session header limits are malformed: ${messageOf(error)}`)
  }
  if (!recorded || recorded.maxTotalTokens === undefined) return recorded && { limits: recorded }
  const { maxTotalTokens, ...rest } = recorded
  const left = maxTotalTokens - (await spentInTree(store, header, events))
  if (left >= 1) return { limits: { ...rest, maxTotalTokens: left } }
  return { limits: rest, spent: limitReason('maxTotalTokens', maxTotalTokens) }
}
