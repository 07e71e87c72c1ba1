/** A model request as data (everything but its abort signal): what a host-placed model is called with. */
import { contentBlocks, type ContentBlockSchema } from './content.js'
import { arrayOf, boolean, closed, count, object, string, union, type Wire } from '../schema.js'

/** What the model sees of a tool. */
export const ToolSchema = closed({ name: string, description: string, parameters: object })
export type ToolSchema = Wire<typeof ToolSchema>

/**
 * A tool as a runner's model call names it: its schema, or the index of one of the runner's
 * module tools in the table its `ready` carried (module tools are the same for every child on a
 * runner, so their schemas cross once, not with every call).
 */
export const ToolRef = { anyOf: [ToolSchema, count] } as const
export type ToolRef = Wire<typeof ToolRef>

export const ModelMessage = union(
  [
    closed({ role: { const: 'user' }, content: contentBlocks }),
    closed({ role: { const: 'assistant' }, content: contentBlocks }),
    closed({ role: { const: 'tool' }, callId: string, name: string, isError: boolean, content: contentBlocks }),
  ],
  'role',
)
export type ModelMessage = Wire<typeof ModelMessage, [ContentBlockSchema]>

export const ModelRequestData = closed(
  {
    /** The model id from the agent's options (`options.model`), or the provider name. */
    model: string,
    system: string,
    messages: arrayOf(ModelMessage),
    /** Absent, not empty, when the agent can see no tool. */
    tools: arrayOf(ToolSchema),
    maxTokens: { type: 'integer', minimum: 1 },
  },
  ['system', 'tools', 'maxTokens'],
)
export type ModelRequestData = Wire<typeof ModelRequestData, [ContentBlockSchema]>
