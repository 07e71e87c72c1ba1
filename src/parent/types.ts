/** The provider seam (DESIGN.md "Public surface"). */
import type { AgentOptions, AgentView } from '../agent/view.js'
import type { ToolFilter } from '../agent/tools.js'
import type { ContentBlock } from '../protocol/content.js'

export interface SubagentStartRequest {
  prompt: string | ContentBlock[]
  parent: AgentView
  /** Covers both the creation transaction and the live run. */
  signal: AbortSignal
  label?: string
  agentOptions?: AgentOptions
  outputSchema?: object
  maxDepth?: number
  toolFilter?: ToolFilter
  persona?: string
}

export type SubagentStopReason = 'completed' | 'aborted' | 'error' | 'max-tokens' | 'refusal'

export interface SubagentResult {
  output: ContentBlock[]
  structured?: unknown
  diagnostic?: string
  stopReason: SubagentStopReason
}

export interface SubagentRun {
  /** The child's session id. */
  id: string
  /** Settles with the child's outcome; rejects only for an infrastructure fault. */
  result: Promise<SubagentResult>
  /** Idempotent; rejects only when releasing the child failed. */
  dispose(): Promise<void>
}

export interface SubagentProvider {
  name: string
  capabilities: { outputSchema: boolean; depthLimit: boolean; toolFilter: boolean; persona: boolean }
  inheritsParentContext: boolean
  start(request: SubagentStartRequest): Promise<SubagentRun>
}
