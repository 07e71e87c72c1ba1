/**
 * Settlement notices (CONTRACT.md §13): each settlement of a continuable child becomes a notice
 * in the session of the agent that started it, wherever that agent's loop runs: a top-level agent
 * or an inline child in this thread, a child on a runner through its handle (a `notify` message).
 */
import { settlementNotice, type Notice } from '../../protocol/shapes/notice.js'
import type { Lifecycle } from '../driver/lifecycle.js'

/** A live agent that can take a notice into its inbox. */
export interface Notifiable {
  notify(notice: Notice): void
}

/** Delivers every settlement to its parent, when the parent is still live on this host; returns the unsubscribe. */
export function deliverSettlementNotices(lifecycle: Lifecycle, parentOf: (id: string) => Notifiable | undefined): () => void {
  return lifecycle.on('subagent/settled', (settlement) => parentOf(settlement.parentId)?.notify(settlementNotice(settlement)))
}
