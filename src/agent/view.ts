import type { ContentBlock } from '../protocol/content.js'
import type { AgentOptions } from '../protocol/child.js'
import type { SessionEvent, SessionHeader } from '../protocol/session.js'

export type { AgentOptions }

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
