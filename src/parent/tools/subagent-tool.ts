/**
 * The model-facing `subagent` tool (CONTRACT.md §6). One instance binds one provider; the model
 * never picks the transport. Foreground calls wait and always dispose; background calls register
 * a job owned by the calling agent. Misconfiguration fails when the tool is created, not when
 * the model first calls it.
 */
import { defineTool, ToolError, type ToolDefinition, type ToolFilter } from '../../agent/tools.js'
import type { AgentOptions } from '../../agent/view.js'
import { textOf, type ContentBlock } from '../../protocol/content.js'
import { messageOf, subagentError } from '../../protocol/errors.js'
import { checkLimits, type ChildLimits } from '../driver/limits.js'
import { withDelegatingCall } from '../driver/delegating-call.js'
import { checkAgentOptions, isNonNegativeSafeInteger } from '../options.js'
import type { Host } from '../host/host.js'
import type { SubagentProvider, SubagentResult, SubagentStartRequest } from '../types.js'

export interface SubagentToolConfig {
  /** The provider this tool delegates to: a provider object, or the host's 'spawn' / 'fork'. */
  provider: SubagentProvider | 'spawn' | 'fork'
  toolName?: string
  enableRunInBackground?: boolean
  backgroundMode?: 'one-shot'
  agentOptions?: AgentOptions
  persona?: string
  toolFilter?: ToolFilter
  /** Absolute delegation cap; default 3, `0` forbids delegation, 'provider-managed' sends none. */
  maxDepth?: number | 'provider-managed'
  /** Limits for every child this tool starts (CONTRACT.md §11); never wider than what the caller has left. */
  limits?: ChildLimits
}

export interface ForegroundValue {
  kind: 'foreground'
  runId: string
  output: ContentBlock[]
}

export interface BackgroundValue {
  kind: 'background'
  jobId: string
}

// A type alias, not an interface: tool argument types must be assignable to Record<string, unknown>.
/** The `subagent` tool's arguments, as the model gives them. */
export type SubagentArgs = {
  description: string
  prompt: string
  run_in_background?: boolean
}

const HEADLINES: Record<Exclude<SubagentResult['stopReason'], 'completed'>, string> = {
  aborted: 'subagent run was cancelled',
  error: 'subagent run failed',
  'max-tokens': 'subagent run hit its token limit before finishing',
  refusal: 'subagent declined the task',
}

export function createSubagentTool(host: Pick<Host, 'spawn' | 'fork' | 'jobs'>, config: SubagentToolConfig): ToolDefinition<SubagentArgs> {
  const settings = checkConfig(host, config)
  const { provider, background } = settings
  const fork = provider.inheritsParentContext
  const properties: Record<string, object> = {
    description: { type: 'string', description: 'A short (3-5 word) label for the task, shown to the user.' },
    prompt: {
      type: 'string',
      description: fork
        ? 'The task for the forked subagent. It already sees this conversation up to your last completed turn, so say what to do, not what it already knows.'
        : 'The complete task for the subagent. It starts with no memory of this conversation: include every fact, path and constraint it needs.',
    },
  }
  if (background) {
    properties.run_in_background = {
      type: 'boolean',
      description: 'Run in the background (default false): you get a job id at once; collect the result with job_output, stop it with job_kill.',
    }
  }
  return defineTool<SubagentArgs>({
    name: settings.toolName,
    description: fork
      ? 'Delegate a task to a forked subagent that starts from a copy of this conversation. It works with its own tools and returns only its final answer.'
      : 'Delegate a self-contained task to a fresh subagent. It starts with no memory of this conversation, works with its own tools, and returns only its final answer.',
    parameters: { type: 'object', properties, required: ['description', 'prompt'], additionalProperties: false },
    async execute(args, exec) {
      if (args.run_in_background && !background) throw new ToolError('run_in_background is not enabled for this subagent tool')
      const delegating = { parentId: exec.agent.id, callId: exec.callId }
      const request = (signal: AbortSignal): SubagentStartRequest => ({ ...settings.request, prompt: args.prompt, parent: exec.agent, signal, label: args.description })
      if (args.run_in_background) {
        const stop = new AbortController()
        const forward = () => stop.abort(exec.signal.reason)
        if (exec.signal.aborted) forward()
        else exec.signal.addEventListener('abort', forward, { once: true })
        try {
          const run = await withDelegatingCall(delegating, () => start(provider, request(stop.signal)))
          const job = host.jobs.register(exec.agent.id, args.description, run, stop)
          return { kind: 'background', jobId: job.id } satisfies BackgroundValue
        } finally {
          // The job outlives this tool call: only the start phase follows the call's signal.
          exec.signal.removeEventListener('abort', forward)
        }
      }
      const run = await withDelegatingCall(delegating, () => start(provider, request(exec.signal)))
      const [result] = await Promise.allSettled([run.result])
      const [disposal] = await Promise.allSettled([run.dispose()])
      const failures: string[] = []
      if (result.status === 'rejected') failures.push(`subagent run failed: ${messageOf(result.reason)}`)
      else if (result.value.stopReason !== 'completed') failures.push(...describeFailure(result.value))
      if (disposal.status === 'rejected') {
        // The child's answer is not lost because its release failed.
        if (result.status === 'fulfilled' && result.value.stopReason === 'completed') failures.push(`subagent run completed:\n${textOf(result.value.output)}`)
        failures.push(`dispose failed: ${messageOf(disposal.reason)}`)
      }
      if (failures.length > 0 || result.status === 'rejected') throw new ToolError(failures.join('\n'))
      return { kind: 'foreground', runId: run.id, output: result.value.output } satisfies ForegroundValue
    },
    render(value) {
      const v = value as ForegroundValue | BackgroundValue
      return v.kind === 'background' ? `started background subagent job ${v.jobId}` : textOf(v.output)
    },
  })
}

async function start(provider: SubagentProvider, request: SubagentStartRequest) {
  try {
    return await provider.start(request)
  } catch (error) {
    throw new ToolError(messageOf(error))
  }
}

function describeFailure(result: SubagentResult): string[] {
  const lines = [HEADLINES[result.stopReason as keyof typeof HEADLINES]]
  if (result.diagnostic) lines.push(`Diagnostic: ${result.diagnostic}`)
  const partial = textOf(result.output)
  if (partial) lines.push(`Partial output before the run ended:\n${partial}`)
  return lines
}

function checkConfig(host: Pick<Host, 'spawn' | 'fork'>, config: SubagentToolConfig) {
  if (typeof config !== 'object' || config === null) throw subagentError('ERR_SUBAGENT_ARGUMENT', 'createSubagentTool needs a config object')
  const provider = config.provider === 'spawn' ? host.spawn : config.provider === 'fork' ? host.fork : config.provider
  if (typeof provider?.start !== 'function' || typeof provider.capabilities !== 'object') {
    throw subagentError('ERR_SUBAGENT_ARGUMENT', "subagent tool config.provider must be a SubagentProvider or 'spawn' / 'fork'")
  }
  const toolName = config.toolName ?? 'subagent'
  const background = config.enableRunInBackground ?? true
  if (typeof background !== 'boolean') throw subagentError('ERR_SUBAGENT_ARGUMENT', 'enableRunInBackground must be a boolean')
  if ((config.backgroundMode ?? 'one-shot') !== 'one-shot') {
    throw subagentError('ERR_SUBAGENT_ARGUMENT', `backgroundMode ${JSON.stringify(config.backgroundMode)} is not supported: only 'one-shot' is available`)
  }
  const { capabilities } = provider
  const request: Omit<SubagentStartRequest, 'prompt' | 'parent' | 'signal'> = {}
  const maxDepth = config.maxDepth ?? 3
  if (maxDepth !== 'provider-managed') {
    if (!isNonNegativeSafeInteger(maxDepth)) {
      throw subagentError('ERR_SUBAGENT_ARGUMENT', "subagent tool maxDepth must be a non-negative safe integer or 'provider-managed'")
    }
    if (!capabilities.depthLimit) throw subagentError('ERR_SUBAGENT_CAPABILITY', `provider "${provider.name}" has no depthLimit capability: use maxDepth 'provider-managed'`)
    request.maxDepth = maxDepth
  }
  if (config.persona !== undefined) {
    if (!capabilities.persona) throw subagentError('ERR_SUBAGENT_CAPABILITY', `provider "${provider.name}" has no persona capability`)
    if (typeof config.persona !== 'string') throw subagentError('ERR_SUBAGENT_ARGUMENT', 'subagent tool persona must be a string')
    request.persona = config.persona
  }
  if (config.toolFilter !== undefined) {
    if (!capabilities.toolFilter) throw subagentError('ERR_SUBAGENT_CAPABILITY', `provider "${provider.name}" has no toolFilter capability`)
    const { allow, deny } = config.toolFilter
    if (allow === undefined && deny === undefined) throw subagentError('ERR_SUBAGENT_ARGUMENT', 'subagent tool toolFilter must name allow or deny')
    request.toolFilter = config.toolFilter
  }
  if (config.agentOptions !== undefined) request.agentOptions = checkAgentOptions(config.agentOptions, 'subagent tool config.agentOptions')
  const limits = checkLimits(config.limits)
  if (limits !== undefined) request.limits = limits
  return { provider, toolName, background, request }
}

