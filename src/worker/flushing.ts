/** The agent module's models, tools and hooks, each calling `flush` before the module's own code runs. */
import type { Model } from '../agent/model.js'
import type { AgentHooks, AgentModule } from '../agent/module.js'
import type { ToolDefinition } from '../agent/tools.js'
import type { StreamChunk } from '../protocol/stream.js'

export function flushing(module: AgentModule, flush: () => void): { models: Record<string, Model>; tools: ToolDefinition[]; hooks: AgentHooks } {
  const models: Record<string, Model> = {}
  for (const [name, model] of Object.entries(module.models ?? {})) models[name] = { stream: (request) => pulls(model.stream(request), flush) }
  // Object.create keeps everything else of the tool (render, flags), wherever it is defined.
  const tools = (module.tools ?? []).map((tool): ToolDefinition =>
    Object.assign(Object.create(tool) as ToolDefinition, {
      execute: (args: Record<string, unknown>, exec: Parameters<ToolDefinition['execute']>[1]) => {
        flush()
        return tool.execute(args, exec)
      },
    }),
  )
  const { beforeStep, afterTool } = module.hooks ?? {}
  const hooks: AgentHooks = {}
  if (beforeStep) hooks.beforeStep = (agent) => (flush(), beforeStep(agent))
  if (afterTool) hooks.afterTool = (call, result) => (flush(), afterTool(call, result))
  return { models, tools, hooks }
}

/** A model's stream, flushed before each pull: the text it streamed so far survives whatever comes next. */
async function* pulls(stream: AsyncIterable<StreamChunk>, flush: () => void): AsyncGenerator<StreamChunk> {
  const iterator = stream[Symbol.asyncIterator]()
  let done = false
  try {
    for (;;) {
      flush()
      const step = await iterator.next()
      if (step.done) {
        done = true
        return
      }
      yield step.value
    }
  } finally {
    if (!done) void Promise.resolve(iterator.return?.()).catch(() => {})
  }
}
