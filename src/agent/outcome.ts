/**
 * What a stretch of a session says (CONTRACT.md §3), read the same way for a child's result and a
 * top-level agent's turn: the output (the last non-empty assistant message, else all streamed
 * text, else nothing), the last turn end, and the usage summed.
 */
import type { ContentBlock } from '../protocol/shapes/content.js'
import type { SessionEvent, TurnEndReason, Usage } from '../protocol/shapes/session.js'

export type StopReason = 'completed' | 'aborted' | 'error' | 'max-tokens' | 'refusal'

export interface TurnsRead {
  output: ContentBlock[]
  end: TurnEndReason | undefined
  usage: Usage | undefined
}

/** Reads `events` from index `from` on (a fork seed is not the child's own). */
export function readTurns(events: readonly SessionEvent[], from: number): TurnsRead {
  let lastMessage: ContentBlock[] | undefined
  let streamed = ''
  /** How much of `streamed` belongs to steps that ended (an assistant message). */
  let committed = 0
  let end: TurnEndReason | undefined
  let usage: Usage | undefined
  for (let i = from; i < events.length; i++) {
    const { type, data } = events[i]!
    if (type === 'assistant/message') {
      const { content, usage: step } = data
      if (content.length > 0) lastMessage = content
      committed = streamed.length
      if (step) usage = addUsage(usage, step)
    } else if (type === 'assistant/chunk') {
      streamed += data.chunk.text
    } else if (type === 'child/moved') {
      // The request its runner was streaming is made again elsewhere: what it streamed does not count.
      streamed = streamed.slice(0, committed)
    } else if (type === 'turn/end') {
      end = data.reason
    }
  }
  const output = lastMessage ? lastMessage.map((b) => ({ ...b })) : streamed ? [{ type: 'text' as const, text: streamed }] : []
  return { output, end, usage }
}

/** Two usages summed, as a new object (a record's own is never handed out); an absent one adds nothing. */
export function addUsage(a: Usage | undefined, b: Usage): Usage {
  return { inputTokens: (a?.inputTokens ?? 0) + b.inputTokens, outputTokens: (a?.outputTokens ?? 0) + b.outputTokens }
}

export function stopReasonOf(end: TurnEndReason | undefined): StopReason {
  switch (end?.kind) {
    case 'completed':
      return 'completed'
    case 'max-tokens':
      return 'max-tokens'
    case 'aborted':
      return 'aborted'
    case 'blocked':
      return 'refusal'
    default:
      return 'error'
  }
}
