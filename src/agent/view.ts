import type { ContentBlock } from '../protocol/shapes/content.js'
import type { AgentOptions } from '../protocol/shapes/child.js'
import type { SessionEvent, SessionHeader, Usage } from '../protocol/shapes/session.js'
import type { StopReason } from './outcome.js'

export type { AgentOptions }

/** What anyone may see of an agent; any object of this shape can be a parent. */
export interface AgentView {
  id: string
  options: AgentOptions
  session: { header: SessionHeader; events: readonly SessionEvent[] }
}

/** How a top-level agent's turn ended: what `agent.run()` resolves with. */
export interface TurnOutcome {
  output: ContentBlock[]
  stopReason: StopReason
  usage?: Usage
  /** Why the turn ended `error` or `refusal`: the turn end's message. */
  diagnostic?: string
}

export interface Agent extends AgentView {
  /** Queues a user message; a turn starts at once if the agent is idle. */
  followup(message: string | ContentBlock[]): void
  whenIdle(): Promise<void>
  /** Ends the running turn `aborted` with this reason. */
  cancel(reason?: unknown): void
  /** Sends a message and resolves once the agent is idle again, with what its turn came to. */
  run(message: string | ContentBlock[]): Promise<TurnOutcome>
  /** Cancels the agent, waits for it, and removes it from its host (its transcript stays in the store). */
  dispose(): Promise<void>
  /** dispose(): `await using agent = host.createAgent(...)` disposes it when the block is left. */
  [Symbol.asyncDispose](): Promise<void>
}
