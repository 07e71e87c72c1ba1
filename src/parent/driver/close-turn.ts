/**
 * What the host records for a turn its child never ended: the child's runner died (crashed, or
 * was terminated after the grace), so the host writes the `turn/end`, with the diagnostic, and the
 * transcript on disk says what the result says. Shared by the one-shot run and a continuable
 * child's activations: `from` is where the turn's events may begin (after a fork seed, or at the
 * activation's start).
 */
import type { LimitReason } from '../../agent/limit-stop.js'
import type { SessionEvent, TurnEndReason } from '../../protocol/shapes/session.js'
import type { ChildOutcome } from '../transport.js'
import { diagnosticText } from './result.js'

export function closeTurn(
  events: readonly SessionEvent[],
  from: number,
  fault: NonNullable<ChildOutcome['fault']>,
  limit: LimitReason | undefined,
  record: (event: SessionEvent) => void,
): void {
  let turn = events.length - 1
  while (turn >= from && events[turn]!.type !== 'turn/start' && events[turn]!.type !== 'turn/end') turn--
  if (turn < from || events[turn]!.type !== 'turn/start') return
  const diagnostic = diagnosticText(fault.diagnostic)
  // A child stopped for a limit records the limit's reason, as a cooperative stop would have,
  // however its runner went after the cancel (the grace, or a liveness check that came first).
  const reason: TurnEndReason = limit
    ? { kind: 'aborted', reason: limit }
    : fault.stopReason === 'aborted'
      ? { kind: 'aborted', reason: { kind: 'terminated', diagnostic } }
      : { kind: 'error', message: diagnostic }
  record({ seq: events.length, type: 'turn/end', data: { reason } })
}
