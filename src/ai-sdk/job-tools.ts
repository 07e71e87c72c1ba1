/**
 * `jobTools(host, { parentId })`: `job_output`, `job_kill` and `job_list` as AI SDK tools, for the
 * background jobs a `delegationTool` with the same `parentId` starts (the `subagent` tool tells
 * the model to collect them with `job_output`). Each sees only that parent's jobs.
 */
import { createJobTools, type Host } from '../index.js'
import { asAiSdkTool } from './as-tool.js'
import { parentFromMessages } from './parent-from-messages.js'
import type { Tool } from 'ai'
import { subagentError } from '../protocol/errors.js'

export type JobToolName = 'job_output' | 'job_kill' | 'job_list'

export function jobTools(host: Pick<Host, 'jobs' | 'agents'>, owner: { parentId: string }): Record<JobToolName, Tool<Record<string, unknown>, string>> {
  const parentId = owner?.parentId
  if (typeof parentId !== 'string' || parentId === '') throw subagentError('ERR_SUBAGENT_ARGUMENT', 'jobTools needs { parentId }: the parentId its delegationTool was given')
  const tools: Partial<Record<JobToolName, Tool<Record<string, unknown>, string>>> = {}
  for (const definition of createJobTools(host)) {
    // Job tools only ask who is calling: the view of the jobs' owner.
    tools[definition.name as JobToolName] = asAiSdkTool(definition, () => parentFromMessages(host, [], { id: parentId }))
  }
  return tools as Record<JobToolName, Tool<Record<string, unknown>, string>>
}
