/** Lifecycle events (CONTRACT.md §7). Observers can never break a run: a throwing listener is reported as a process warning. */
import type { SessionEvent, Usage } from '../../protocol/shapes/session.js'
import type { Settlement, SubagentResult } from '../types.js'
import { messageOf, subagentError } from '../../protocol/errors.js'

export interface SubagentStartEvent {
  runId: string
  provider: string
  /** The child's session id. */
  id: string
  /** True when the child runs in the host's own thread (the inline transport). */
  local: boolean
  label?: string
  /** The delegating agent's id. */
  parentId: string
  /** The child's delegation depth (1 for a child of a top-level agent). */
  depth: number
}

export interface SubagentEndEvent extends SubagentStartEvent {
  stopReason: SubagentResult['stopReason']
  lastAssistantMessage?: string
  /** From publication to the settled result. */
  durationMs: number
  usage?: Usage
  /** Own usage plus every descendant's, as on the result. */
  totalUsage?: Usage
  /** Why the run did not complete (only then). */
  diagnostic?: string
  /** How often the child was rebuilt on another runner (CONTRACT.md §8); only when it was. */
  moves?: number
}

/** One event of a child, once it is in the host's copy of the child's session (CONTRACT.md §12). */
export interface SubagentEventInfo {
  runId: string
  /** The child's session id. */
  id: string
  event: SessionEvent
}

export interface LifecycleEvents {
  'subagent/start': SubagentStartEvent
  'subagent/end': SubagentEndEvent
  'subagent/event': SubagentEventInfo
  /** A continuable child's activation ended (CONTRACT.md §13). */
  'subagent/settled': Settlement
}

const EVENT_NAMES: ReadonlySet<string> = new Set<LifecycleEventName>(['subagent/start', 'subagent/end', 'subagent/event', 'subagent/settled'])

export type LifecycleEventName = keyof LifecycleEvents

export class Lifecycle {
  readonly #listeners = new Map<LifecycleEventName, Set<(info: never) => void>>()

  on<E extends LifecycleEventName>(event: E, listener: (info: LifecycleEvents[E]) => void): () => void {
    if (!EVENT_NAMES.has(event)) {
      throw subagentError('ERR_SUBAGENT_ARGUMENT', `unknown lifecycle event ${JSON.stringify(event)}: use 'subagent/start', 'subagent/end', 'subagent/event' or 'subagent/settled'`)
    }
    if (typeof listener !== 'function') throw subagentError('ERR_SUBAGENT_ARGUMENT', 'a lifecycle listener must be a function')
    let set = this.#listeners.get(event)
    if (!set) this.#listeners.set(event, (set = new Set()))
    const entry = listener as (info: never) => void
    set.add(entry)
    return () => void set.delete(entry)
  }

  /** Whether anyone listens: a child's every event is offered, so its info is built only then. */
  listening(event: LifecycleEventName): boolean {
    return (this.#listeners.get(event)?.size ?? 0) > 0
  }

  emit<E extends LifecycleEventName>(event: E, info: LifecycleEvents[E]): void {
    const set = this.#listeners.get(event)
    if (!set) return
    const report = (error: unknown) => {
      const reason = messageOf(error)
      process.emitWarning(`a '${event}' listener threw: ${reason}`, { code: 'SUBAGENT_LISTENER_ERROR', detail: `run ${info.runId}` })
    }
    for (const listener of [...set]) {
      try {
        const returned: unknown = (listener as (info: LifecycleEvents[E]) => unknown)(info)
        // An async listener's rejection is a throw too: reported, never an unhandled rejection.
        if (typeof (returned as PromiseLike<unknown> | undefined)?.then === 'function') (returned as PromiseLike<unknown>).then(undefined, report)
      } catch (error) {
        report(error)
      }
    }
  }
}
