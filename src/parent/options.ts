/** Option errors and the checks every room of the host shares (settings, the driver, stores, the tools, the bullmq adapter). */
import { subagentError, SubagentTypeError } from '../protocol/errors.js'
import type { AgentOptions } from '../agent/view.js'

/** A host option with a wrong value: names the option, the value and what it may be. */
export class InvalidOptionError extends SubagentTypeError<'ERR_SUBAGENT_OPTION'> {
  override name = 'InvalidOptionError'
  readonly option: string

  constructor(option: string, value: unknown, expected: string) {
    super('ERR_SUBAGENT_OPTION', `${option} must be ${expected}, not ${describe(value)}`)
    this.option = option
  }
}

function describe(value: unknown): string {
  if (typeof value === 'number' || typeof value === 'bigint') return String(value)
  if (typeof value === 'function') return 'a function'
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

/** The longest delay a Node.js timer honours; beyond it the timer fires at once. */
export const MAX_TIMER_MS = 2 ** 31 - 1

/** A whole number in [min, max], or undefined when not given; anything else is an InvalidOptionError. */
export function integerOption(option: string, value: unknown, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (value === undefined) return undefined
  if (!Number.isSafeInteger(value) || (value as number) < min || (value as number) > max) {
    throw new InvalidOptionError(option, value, max === Number.MAX_SAFE_INTEGER ? `a whole number >= ${min}` : `a whole number from ${min} to ${max}`)
  }
  return value as number
}

/** Depths and counts: a safe integer >= 0, and never -0. */
export function isNonNegativeSafeInteger(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0 && !Object.is(value, -0)
}

/** Validates agent options; `what` names them in errors. */
export function checkAgentOptions(options: unknown, what: string): AgentOptions {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) throw subagentError('ERR_SUBAGENT_AGENT_OPTIONS', `${what} must be an object`)
  const { provider, model, maxTokens, subagentDepth } = options as AgentOptions
  for (const [key, value] of [['provider', provider], ['model', model]] as const) {
    if (value !== undefined && (typeof value !== 'string' || value === '')) throw subagentError('ERR_SUBAGENT_AGENT_OPTIONS', `${what}.${key} must be a non-empty string`)
  }
  if (maxTokens !== undefined && !(Number.isSafeInteger(maxTokens) && maxTokens > 0)) {
    throw subagentError('ERR_SUBAGENT_AGENT_OPTIONS', `${what}.maxTokens must be a positive safe integer`)
  }
  if (subagentDepth !== undefined && !isNonNegativeSafeInteger(subagentDepth)) {
    throw subagentError('ERR_SUBAGENT_AGENT_OPTIONS', 'agent subagentDepth must be a non-negative safe integer')
  }
  return options as AgentOptions
}
