/**
 * The `subagent` tool for the AI SDK with the child's progress as preliminary tool results: its
 * `execute` is an async generator (the AI SDK's way of streaming a tool's output), yielding the
 * text the child is streaming, then the call's final result, which is the library tool's own.
 * `streamText` shows each as a preliminary `tool-result`; `generateText` sees only the last.
 */
import { tool, type Tool } from 'ai'
import { createSubagentTool, type ContinuableStartRequest, type Host, type HostProvider, type SubagentProvider, type SubagentRun, type SubagentToolConfig } from '../index.js'
import { inputSchemaOf, render, runTool, toolExecution, type ParentOf } from './as-tool.js'

type Input = { description: string; prompt: string; run_in_background?: boolean }
type ProgressHost = Pick<Host, 'spawn' | 'fork' | 'jobs' | 'agents'>

export function progressTool(host: ProgressHost, config: SubagentToolConfig, parentOf: ParentOf): Tool<Input, string> {
  // Checks the config once, and gives the tool's description and arguments.
  const template = createSubagentTool(host, config)
  const base: SubagentProvider = config.provider === 'spawn' ? host.spawn : config.provider === 'fork' ? host.fork : config.provider
  return tool<Input, string>({
    description: template.description,
    inputSchema: inputSchemaOf<Input>(template),
    async *execute(input, options) {
      const { provider, started } = watching(base)
      // One `subagent` tool per call, over a provider that hands over the run it starts: the call
      // itself (checks, waiting, disposal, failure texts) stays the library's.
      const call = createSubagentTool(host, { ...config, provider })
      const outcome = runTool(call, input, toolExecution(parentOf(options), options)).then((value) => render(call, value))
      // Settled below; guarded so a consumer that stops reading leaves no unhandled rejection.
      outcome.catch(() => {})
      if (input.run_in_background !== true) {
        const run = await Promise.race([started, outcome.then(none, none)])
        if (run) yield* textOf(run, host.agents.get(run.id)?.session.header.seedLength ?? 0)
      }
      yield await outcome
    },
  })
}

const none = () => undefined

/** `base`, with the run its start makes handed to `started`. */
function watching(base: SubagentProvider): { provider: SubagentProvider; started: Promise<SubagentRun> } {
  let hand: (run: SubagentRun) => void = () => {}
  const started = new Promise<SubagentRun>((resolve) => (hand = resolve))
  const provider: SubagentProvider = {
    name: base.name,
    capabilities: base.capabilities,
    inheritsParentContext: base.inheritsParentContext,
    async start(request) {
      const run = await base.start(request)
      hand(run)
      return run
    },
    run: (request) => base.run(request),
  }
  // A continuable start (backgroundMode 'continuable') goes through as it is: nothing to watch.
  const { startContinuable } = base as Partial<Pick<HostProvider, 'startContinuable'>>
  if (typeof startContinuable === 'function') Object.assign(provider, { startContinuable: (request: ContinuableStartRequest) => startContinuable.call(base, request) })
  return { provider, started }
}

/** The text of the child's message in progress, after each chunk; a fork's copied seed is skipped. */
async function* textOf(run: SubagentRun, from: number): AsyncGenerator<string> {
  let text = ''
  for await (const event of run.events({ from })) {
    if (event.type === 'assistant/chunk') {
      text += event.data.chunk.text
      yield text
    } else if (event.type === 'assistant/message') text = ''
  }
}
