/** Delegation depth (CONTRACT.md §1.3): the persisted header is authoritative; options may only deepen it. */
import { SubagentError, subagentError } from '../../protocol/errors.js'
import type { AgentView } from '../../agent/view.js'
import { isNonNegativeSafeInteger as isDepth } from '../options.js'

export class SubagentDepthError extends SubagentError<'ERR_SUBAGENT_DEPTH'> {
  override name = 'SubagentDepthError'
  readonly attemptedDepth: number
  readonly maxDepth: number

  constructor(attemptedDepth: number, maxDepth: number) {
    super('ERR_SUBAGENT_DEPTH', `subagent depth ${attemptedDepth} exceeds maxDepth ${maxDepth}`)
    this.attemptedDepth = attemptedDepth
    this.maxDepth = maxDepth
  }
}

export function checkMaxDepth(maxDepth: unknown): number | undefined {
  if (maxDepth === undefined) return undefined
  if (!isDepth(maxDepth)) throw subagentError('ERR_SUBAGENT_REQUEST', 'subagent maxDepth must be a non-negative safe integer')
  return maxDepth
}

function depthOf(agent: AgentView): number {
  const runtime = agent.options.subagentDepth
  if (runtime !== undefined && !isDepth(runtime)) throw subagentError('ERR_SUBAGENT_AGENT_OPTIONS', 'agent subagentDepth must be a non-negative safe integer')
  const stored = agent.session.header.delegationDepth
  if (stored !== undefined && !isDepth(stored)) throw subagentError('ERR_SUBAGENT_HEADER', 'session header delegationDepth must be a non-negative safe integer')
  return Math.max(stored ?? 0, runtime ?? 0)
}

export function childDepthOf(parent: AgentView, maxDepth: number | undefined): number {
  const depth = depthOf(parent) + 1
  if (!Number.isSafeInteger(depth)) throw subagentError('ERR_SUBAGENT_DEPTH_RANGE', 'subagent child depth exceeds the safe-integer range')
  if (maxDepth !== undefined && depth > maxDepth) throw new SubagentDepthError(depth, maxDepth)
  return depth
}
