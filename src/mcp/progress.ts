/**
 * The child's progress, as MCP progress notifications: how many events its transcript holds and
 * the kind of the last one. One small function, so its source (here the host's mirror of the
 * child, polled) can become a per-event host listener without touching the server.
 */
import type { Host } from '../index.js'

export interface Progress {
  /** Events the child's transcript holds so far; grows by one or more between reports. */
  progress: number
  /** The type of the latest event, e.g. `assistant/message` or `tool/result`. */
  message: string
}

/** How often the mirror is looked at; the mirror itself is updated as the child's events arrive. */
const POLL_MS = 100

/** Calls `report` whenever the child's transcript has grown; returns the stop, which reports the last growth. */
export function watchProgress(host: Pick<Host, 'agents'>, childId: string, report: (progress: Progress) => void): () => void {
  let seen = 0
  // Kept once found: a finished child leaves the registry before its last events are reported.
  let child = host.agents.get(childId)
  const look = () => {
    child ??= host.agents.get(childId)
    const events = child?.session.events
    if (!events || events.length === seen) return
    seen = events.length
    report({ progress: seen, message: events[seen - 1]!.type })
  }
  look()
  const timer = setInterval(look, POLL_MS)
  // A progress timer must never keep a server's process alive on its own.
  timer.unref()
  return () => {
    clearInterval(timer)
    // The end of the child is progress too, and it came after the last poll.
    look()
  }
}
