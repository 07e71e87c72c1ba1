/**
 * The agent module's models, tools and hooks, each run only once everything queued on the
 * channel has been sent: module code runs on the runner and may take it down (exit, spin, crash),
 * and what a child recorded before must already be on its way to the host.
 */
import type { Model } from '../agent/models/model.js'
import type { AgentHooks, AgentModule } from '../agent/module.js'
import { toolSourceOf, type ToolDefinition, type ToolSource } from '../agent/tools/tools.js'
import type { StreamChunk } from '../protocol/shapes/stream.js'
import { ToolTable } from './tool-table.js'

/** Runs module code after the queued messages are sent (see Outbox.afterSent). */
export type Guard = <T>(code: () => T) => Promise<Awaited<T>>

/** The agent module as the children of one runner use it: each entry guarded. */
export interface LocalModule {
  models: Record<string, Model>
  tools: ToolDefinition[]
  /** The module's tools by name, for every child on the runner that sees no host tools: built once, not per child. */
  toolSource: ToolSource
  /** The tools' schemas, sent to the host once. */
  table: ToolTable
  hooks: AgentHooks
}

export function flushing(module: AgentModule, guard: Guard): LocalModule {
  const models: Record<string, Model> = {}
  for (const [name, model] of Object.entries(module.models ?? {})) models[name] = { stream: (request) => pulls(() => model.stream(request), guard) }
  // Object.create keeps everything else of the tool (render, flags), wherever it is defined.
  const tools = (module.tools ?? []).map((tool): ToolDefinition =>
    Object.assign(Object.create(tool) as ToolDefinition, {
      execute: (args: Record<string, unknown>, exec: Parameters<ToolDefinition['execute']>[1]) => guard(() => tool.execute(args, exec)),
    }),
  )
  const { beforeStep, afterTool } = module.hooks ?? {}
  const hooks: AgentHooks = {}
  if (beforeStep) hooks.beforeStep = (agent) => guard(() => beforeStep(agent))
  if (afterTool) hooks.afterTool = (call, result) => guard(() => afterTool(call, result))
  return { models, tools, toolSource: toolSourceOf([], tools), table: new ToolTable(tools), hooks }
}

/** A model's stream, each pull guarded: the text it streamed so far survives whatever comes next. */
async function* pulls(open: () => AsyncIterable<StreamChunk>, guard: Guard): AsyncGenerator<StreamChunk> {
  const iterator = (await guard(open))[Symbol.asyncIterator]()
  let done = false
  try {
    for (;;) {
      const step = await guard(() => iterator.next())
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
