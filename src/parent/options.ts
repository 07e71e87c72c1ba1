import type { AgentOptions } from '../agent/view.js'

/** Depths and counts: a safe integer >= 0, and never -0. */
export function isNonNegativeSafeInteger(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0 && !Object.is(value, -0)
}

/** Validates agent options; `what` names them in errors. */
export function checkAgentOptions(options: unknown, what: string): AgentOptions {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) throw new TypeError(`${what} must be an object`)
  const { provider, model, maxTokens, subagentDepth } = options as AgentOptions
  for (const [key, value] of [['provider', provider], ['model', model]] as const) {
    if (value !== undefined && (typeof value !== 'string' || value === '')) throw new TypeError(`${what}.${key} must be a non-empty string`)
  }
  if (maxTokens !== undefined && !(Number.isSafeInteger(maxTokens) && maxTokens > 0)) {
    throw new TypeError(`${what}.maxTokens must be a positive safe integer`)
  }
  if (subagentDepth !== undefined && !isNonNegativeSafeInteger(subagentDepth)) {
    throw new TypeError('agent subagentDepth must be a non-negative safe integer')
  }
  return options as AgentOptions
}
