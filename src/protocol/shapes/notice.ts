/**
 * The settlement notice (CONTRACT.md §13): what a continuable child's parent is told in its own
 * session when an activation of the child ends. Written once here, since the host builds it and a
 * runner hosting the parent records it: a `user/message` with this source and this text.
 */
import { closed, type Wire } from '../schema.js'

export const NoticeSource = closed({ kind: { const: 'subagent-settlement' }, subagentId: { type: 'string', minLength: 1 }, activation: { type: 'integer', minimum: 1 } })
export type NoticeSource = Wire<typeof NoticeSource>

/**
 * The most characters a notice carries. It is recorded as one event of the parent, so it must
 * stay far inside the events a runner may send back (RUNNER_BOUNDS.eventBytes); an answer longer
 * than this is cut and marked: the child's whole transcript keeps it.
 */
export const NOTICE_MAX_CHARS = 1024 * 1024
const CUT_MARK = '\n[notice truncated: the rest is in the subagent transcript]'

/** One notice: its source and its text, `subagent <id> finished (<stopReason>)`, then the last assistant message on the next line. */
export interface Notice {
  source: NoticeSource
  text: string
}

export function settlementNotice(settlement: { id: string; activation: number; stopReason: string; lastAssistantMessage?: string }): Notice {
  const { id, activation, stopReason, lastAssistantMessage } = settlement
  let text = `subagent ${id} finished (${stopReason})`
  if (lastAssistantMessage !== undefined && lastAssistantMessage !== '') text += `\n${lastAssistantMessage}`
  if (text.length > NOTICE_MAX_CHARS) text = text.slice(0, NOTICE_MAX_CHARS - CUT_MARK.length) + CUT_MARK
  return { source: { kind: 'subagent-settlement', subagentId: id, activation }, text }
}

/**
 * Takes from `handed` the notice a recorded `user/message` of this `source` is, if it is one: a
 * step took it, so it is no longer to be handed again (to an activation after this one, or to the
 * runner a moved child is rebuilt on).
 */
export function take(handed: Notice[], source: unknown): void {
  const { kind, subagentId, activation } = source as Partial<NoticeSource>
  if (kind !== 'subagent-settlement') return
  const at = handed.findIndex((notice) => notice.source.subagentId === subagentId && notice.source.activation === activation)
  if (at >= 0) handed.splice(at, 1)
}

/** What crosses to a runner hosting the parent: checked there by the host message's schema. */
export const NoticeFields = { source: NoticeSource, text: { type: 'string', maxLength: NOTICE_MAX_CHARS } } as const
