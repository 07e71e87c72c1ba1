/**
 * What the host records for a turn its child never ended: the child's runner died (crashed, or
 * was terminated after the grace), so the host writes the `turn/end`, with the diagnostic, and the
 * transcript on disk says what the result says. Shared by the one-shot run and a continuable
 * child's activations: `from` is where the turn's events may begin (after a fork seed, or at the
 * activation's start).
 */
import type { SessionEvent, TurnEndReason } from '../../protocol/shapes/session.js'
import type { ChildOutcome } from '../transport.js'
import { diagnosticText } from './result.js'

/** The host cancelled the child with `reason`: the first cancel is the one its turn ends for. */
export interface Cancel {
  reason: unknown
}

/**
 * The reason a request's aborted signal cancels its child with (CONTRACT.md §2, §7): the caller's
 * own, unchanged, when it gave one; `{ kind: 'parent' }` for a plain `abort()` (whose reason is
 * the default AbortError).
 */
export function cancelReason(signal: AbortSignal): unknown {
  const { reason } = signal
  return reason instanceof DOMException && reason.name === 'AbortError' ? { kind: 'parent' } : reason
}

export function closeTurn(
  events: readonly SessionEvent[],
  from: number,
  fault: NonNullable<ChildOutcome['fault']>,
  cancel: Cancel | undefined,
  record: (event: SessionEvent) => void,
): void {
  let turn = events.length - 1
  while (turn >= from && events[turn]!.type !== 'turn/start' && events[turn]!.type !== 'turn/end') turn--
  if (turn < from || events[turn]!.type !== 'turn/start') return
  const diagnostic = diagnosticText(fault.diagnostic)
  // A cancelled child records the cancel's reason unchanged (the caller's own, a limit's, a
  // dispose), as a cooperative stop would have (CONTRACT.md §7), however its runner went after the
  // cancel (the grace, or a liveness check that came first): the result's diagnostic says how it
  // was stopped.
  const reason: TurnEndReason = cancel
    ? { kind: 'aborted', reason: cancel.reason }
    : fault.stopReason === 'aborted'
      ? { kind: 'aborted', reason: { kind: 'terminated', diagnostic } }
      : { kind: 'error', message: diagnostic }
  record({ seq: events.length, type: 'turn/end', data: { reason } })
}
