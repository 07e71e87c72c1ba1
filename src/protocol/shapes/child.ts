/** What building a child needs, as plain data: any runner builds the same child from it. */
import { arrayOf, boolean, closed, count, object, string, type Wire } from '../schema.js'
import { ChildDescriptor, SessionEvent, SessionHeader } from './session.js'

// Checked on the host by parent/options.ts (AGENT_OPTION_RULES), which says the same.
export const AgentOptions = closed(
  {
    /** Name of the registered model (host or agent module) the agent talks to. */
    provider: { type: 'string', minLength: 1 },
    /** Model id passed in each request. */
    model: { type: 'string', minLength: 1 },
    maxTokens: { type: 'integer', minimum: 1 },
    subagentDepth: count,
  },
  ['provider', 'model', 'maxTokens', 'subagentDepth'],
)
export type AgentOptions = Wire<typeof AgentOptions>

export const ToolFilter = closed({ allow: arrayOf(string), deny: arrayOf(string) }, ['allow', 'deny'])
export type ToolFilter = Wire<typeof ToolFilter>

export const ChildSpec = closed(
  {
    id: { type: 'string', minLength: 1 },
    header: SessionHeader,
    options: AgentOptions,
    /** The fork seed (empty for spawn). */
    seed: arrayOf(SessionEvent),
    /** Who the child is told it is: its own persona, else the deployment's (the host resolves which). */
    persona: string,
    toolFilter: ToolFilter,
    outputSchema: object,
    descriptor: ChildDescriptor,
  },
  ['persona', 'toolFilter', 'outputSchema'],
)
export type ChildSpec = Wire<typeof ChildSpec>

/** What a runner needs to offer a host-placed tool to its child as if it were local. */
export const RemoteToolDescriptor = closed(
  { name: string, description: string, parameters: object, needsApproval: boolean, concurrencySafe: boolean, guidance: string },
  ['needsApproval', 'concurrencySafe', 'guidance'],
)
export type RemoteToolDescriptor = Wire<typeof RemoteToolDescriptor>
