import type { ContentBlock } from '../protocol/content.js'
import type { SessionEvent, SessionHeader } from '../protocol/session.js'

export interface AgentOptions {
  /** Name of the registered model (host or agent module) this agent talks to. */
  provider?: string
  /** Model id passed in each request. */
  model?: string
  maxTokens?: number
  subagentDepth?: number
}

/** What anyone may see of an agent; any object of this shape can be a parent. */
export interface AgentView {
  id: string
  options: AgentOptions
  session: { header: SessionHeader; events: readonly SessionEvent[] }
}

export interface Agent extends AgentView {
  followup(message: string | ContentBlock[]): void
  whenIdle(): Promise<void>
  cancel(reason?: unknown): void
}
