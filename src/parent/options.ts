/** Option errors and the checks every room of the host shares (settings, the driver, stores, the tools, the bullmq adapter). */
import { subagentError, SubagentTypeError } from '../protocol/errors.js'
import { describeValue } from '../protocol/values.js'
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
  // String(-0) is '0': the message would name a value the caller did not give.
  if (Object.is(value, -0)) return '-0'
  if (typeof value === 'number' || typeof value === 'bigint') return String(value)
  if (typeof value === 'function') return 'a function'
  return describeValue(value)
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

/** What one AgentOptions key may be: its test, and the words an error says it must be. */
interface AgentOptionRule {
  valid(value: unknown): boolean
  expected: string
  /** A text the contract quotes whole, whoever names the options. */
  text?: string
}

const isNonEmptyString = (value: unknown) => typeof value === 'string' && value !== ''

/**
 * Every AgentOptions key and its check, in one table (as ajv and piscina check theirs):
 * createAgent, resumeAgent, a start request and the subagent tool's config all check here, and
 * the wire schema (protocol/shapes/child.ts) says the same.
 */
const AGENT_OPTION_RULES: { readonly [K in keyof Required<AgentOptions>]: AgentOptionRule } = {
  provider: { valid: isNonEmptyString, expected: 'the name a model is registered under (a non-empty string)' },
  model: { valid: isNonEmptyString, expected: 'a non-empty string (the model id sent with each request)' },
  maxTokens: { valid: (value) => Number.isSafeInteger(value) && (value as number) > 0, expected: 'a positive safe integer' },
  // CONTRACT.md §1.3 quotes this text.
  subagentDepth: { valid: isNonNegativeSafeInteger, expected: 'a non-negative safe integer', text: 'agent subagentDepth must be a non-negative safe integer' },
}

/** Checks agent options against AGENT_OPTION_RULES; `what` names them in errors. */
export function checkAgentOptions(options: unknown, what: string): AgentOptions {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw subagentError('ERR_SUBAGENT_AGENT_OPTIONS', `${what} must be an object like { provider?, model?, maxTokens? }, not ${describe(options)}`)
  }
  return checkAgentOptionValues(options as Record<string, unknown>, () => what)
}

/** The same check of options merged from several sources (a child's): `whose` names where each key came from. */
export function checkAgentOptionValues(options: Readonly<Record<string, unknown>>, whose: (key: keyof AgentOptions) => string): AgentOptions {
  for (const [key, rule] of Object.entries(AGENT_OPTION_RULES) as Array<[keyof AgentOptions, AgentOptionRule]>) {
    const value = options[key]
    if (value !== undefined && !rule.valid(value)) {
      throw subagentError('ERR_SUBAGENT_AGENT_OPTIONS', rule.text ?? `${whose(key)}.${key} must be ${rule.expected}, not ${describe(value)}`)
    }
  }
  return options as AgentOptions
}
