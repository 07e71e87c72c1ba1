/**
 * The agent module's tool schemas, as one runner's children share them: the host is sent the
 * table once (with `ready`), and a model call names each of these tools by its index in it
 * instead of carrying its schema, which both ends would otherwise encode and decode with every
 * call. A module's tools are read once, when it loads, as its hooks are.
 */
import type { ToolSchema as RequestTool } from '../agent/models/model.js'
import { toolSchema, type ToolDefinition } from '../agent/tools/tools.js'
import type { ToolRef, ToolSchema } from '../protocol/shapes/model.js'

export class ToolTable {
  readonly schemas: readonly ToolSchema[]
  /** By name, the index the child's tool map would resolve it to: a later tool of a name overrides an earlier one. */
  readonly #index = new Map<string, number>()

  constructor(tools: readonly ToolDefinition[]) {
    this.schemas = tools.map(toolSchema)
    this.schemas.forEach((schema, index) => this.#index.set(schema.name, index))
  }

  /** Each tool as a call names it: the table's index where the schema is the table's own, else the schema itself. */
  refer(tools: readonly RequestTool[]): ToolRef[] {
    return tools.map((tool) => {
      const index = this.#index.get(tool.name)
      const own = index === undefined ? undefined : this.schemas[index]
      // A child's request lists `toolSchema`s, whose parameters are records; the host checks the call anyway.
      return own && own.description === tool.description && own.parameters === tool.parameters ? index! : (tool as ToolSchema)
    })
  }
}
