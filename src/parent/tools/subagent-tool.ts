/**
 * The model-facing `subagent` tool (CONTRACT.md §6, §13). One instance binds one provider; the
 * model never picks the transport. Foreground calls wait and always dispose. In the background,
 * a one-shot instance registers a job owned by the calling agent; a continuable one starts a
 * child that outlives the call, whose settlements reach the caller as notices in its own session
 * (and whom send_message gives more work). Misconfiguration fails when the tool is created, not
 * when the model first calls it.
 */
import { defineTool, ToolError, type ToolDefinition, type ToolFilter } from '../../agent/tools/tools.js'
import type { AgentOptions } from '../../agent/view.js'
import { textOf, type ContentBlock } from '../../protocol/shapes/content.js'
import { messageOf, subagentError } from '../../protocol/errors.js'
import type { ChildMode } from '../../protocol/shapes/session.js'
import { checkLimits, type ChildLimits } from '../driver/limits.js'
import { checkAgentOptions, isNonNegativeSafeInteger } from '../options.js'
import type { Host } from '../host/host.js'
import { InvalidOptionError } from '../options.js'
import type { ContinuableRun, ContinuableStartRequest, SubagentProvider, SubagentResult, SubagentStartRequest } from '../types.js'
import { SUBAGENT_TOOL_TEXTS as TEXTS } from './texts.js'

export interface SubagentToolConfig {
  /** The provider this tool delegates to: a provider object, or the host's 'spawn' / 'fork'. */
  provider: SubagentProvider | 'spawn' | 'fork'
  toolName?: string
  enableRunInBackground?: boolean
  /** 'one-shot' (default): foreground unless asked, background runs are jobs. 'continuable': background by default, a child that takes more work (CONTRACT.md §13). */
  backgroundMode?: ChildMode
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

/** A continuable start (CONTRACT.md §13): the child's id, for send_message; its answers come as notices. */
export interface ContinuableValue {
  kind: 'continuable'
  subagentId: string
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
  const { provider, background, continuable } = settings
  const fork = provider.inheritsParentContext
  const properties: Record<string, object> = {
    description: { type: 'string', description: 'A short (3-5 word) label for the task, shown to the user.' },
    prompt: { type: 'string', description: fork ? TEXTS.forkPrompt : TEXTS.spawnPrompt },
  }
  if (background) properties.run_in_background = { type: 'boolean', description: continuable ? TEXTS.continuableBackground : TEXTS.oneShotBackground }
  const description = fork ? (continuable ? TEXTS.continuableFork : TEXTS.oneShotFork) : continuable ? TEXTS.continuableSpawn : TEXTS.oneShotSpawn
  return defineTool<SubagentArgs>({
    name: settings.toolName,
    description,
    parameters: { type: 'object', properties, required: ['description', 'prompt'], additionalProperties: false },
    // Only where the model can start continuable work in the background does it need to know how to run it.
    ...(continuable !== undefined && background ? { guidance: TEXTS.continuableGuidance(settings.toolName) } : {}),
    async execute(args, exec) {
      if (args.run_in_background && !background) throw new ToolError('run_in_background is not enabled for this subagent tool')
      const request = (signal: AbortSignal): SubagentStartRequest => ({ ...settings.request, prompt: args.prompt, parent: exec.agent, signal, label: args.description })
      // A continuable instance runs in the background unless asked not to; a one-shot one only when asked.
      if (args.run_in_background ?? (continuable !== undefined && background)) {
        // The child outlives this tool call: only its start follows the call's signal.
        return startPhase(exec.signal, async (signal) => {
          if (continuable) {
            const run = await startContinuable(continuable, request(signal))
            return { kind: 'continuable', subagentId: run.id } satisfies ContinuableValue
          }
          const stop = new AbortController()
          signal.addEventListener('abort', () => stop.abort(signal.reason), { once: true })
          const run = await start(provider, request(stop.signal))
          const job = host.jobs.register(exec.agent.id, args.description, run, stop)
          return { kind: 'background', jobId: job.id } satisfies BackgroundValue
        })
      }
      const run = await start(provider, request(exec.signal))
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
      const v = value as ForegroundValue | BackgroundValue | ContinuableValue
      if (v.kind === 'background') return `started background subagent job ${v.jobId}`
      if (v.kind === 'continuable') return `started subagent ${v.subagentId}`
      return textOf(v.output)
    },
  })
}

/**
 * Runs a background start under a signal that follows the tool call's only until the start is
 * done: what it started outlives the call, and a later abort of the call must not reach it.
 */
async function startPhase<T>(callSignal: AbortSignal, begin: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const phase = new AbortController()
  const forward = () => phase.abort(callSignal.reason)
  if (callSignal.aborted) forward()
  else callSignal.addEventListener('abort', forward, { once: true })
  try {
    return await begin(phase.signal)
  } finally {
    callSignal.removeEventListener('abort', forward)
  }
}

async function start(provider: SubagentProvider, request: SubagentStartRequest) {
  try {
    return await provider.start(request)
  } catch (error) {
    throw new ToolError(messageOf(error))
  }
}

async function startContinuable(provider: ContinuableProvider, request: ContinuableStartRequest): Promise<ContinuableRun> {
  try {
    return await provider.startContinuable(request)
  } catch (error) {
    throw new ToolError(messageOf(error))
  }
}

/** A provider that can start continuable children: the host's own, or any with `startContinuable`. */
type ContinuableProvider = SubagentProvider & { startContinuable(request: ContinuableStartRequest): Promise<ContinuableRun> }

function canContinue(provider: SubagentProvider): provider is ContinuableProvider {
  return typeof (provider as Partial<ContinuableProvider>).startContinuable === 'function'
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
  const mode = config.backgroundMode ?? 'one-shot'
  if (mode !== 'one-shot' && mode !== 'continuable') throw new InvalidOptionError('backgroundMode', mode, "'one-shot' or 'continuable'")
  let continuable: ContinuableProvider | undefined
  if (mode === 'continuable') {
    if (!canContinue(provider)) throw new InvalidOptionError('backgroundMode', mode, `'one-shot' for provider "${provider.name}", which has no startContinuable`)
    continuable = provider
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
  return { provider, toolName, background, continuable, request }
}

