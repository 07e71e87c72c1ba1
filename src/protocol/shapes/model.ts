/** A model request as data (everything but its abort signal): what a host-placed model is called with. */
import { contentBlocks, type ContentBlockSchema } from './content.js'
import { arrayOf, boolean, closed, object, string, union, type Wire } from '../schema.js'

/** What the model sees of a tool. */
export const ToolSchema = closed({ name: string, description: string, parameters: object })
export type ToolSchema = Wire<typeof ToolSchema>

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
