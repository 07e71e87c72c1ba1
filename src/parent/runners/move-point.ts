/**
 * Whether a child whose runner went may be rebuilt on another (CONTRACT.md §8, thread-mates
 * survive), decided by the host alone from what it holds: its copy of the child's session and
 * the host calls in flight. A runner runs module code (a module tool, model or hook) only once
 * everything it queued before was sent (worker/flushing.ts), and the host reads every frame a
 * dead runner sent before it settles its children; so when the host's copy shows no point where
 * module code may have begun, none had. A child is moved only then: waiting on a host-placed
 * model request, on host tools, or between steps with nothing of the module to run before its
 * next host model request. Anything else may have had effects the host cannot see, and is not
 * moved.
 */
import type { ToolCallBlock } from '../../protocol/shapes/content.js'
import type { SessionEvent } from '../../protocol/shapes/session.js'
import type { CallLedger } from './call-ledger.js'

/** The module hooks a runner has (from its `ready`); undefined when it did not say. */
export type RunnerHooks = ReadonlySet<'beforeStep' | 'afterTool'> | undefined

/**
 * What the host judges a child's whereabouts from when its runner went (CONTRACT.md §8):
 * `heard`: every frame the runner sent was read (a thread's, a process's, a node's thread's,
 * which the node relays in order before it says the thread ended); `held`: the runner's last
 * frames may be lost (a node that died: what it published last may never have reached Redis),
 * so only a child that a host call in flight holds is sure to be where the host last saw it.
 */
export type Mobility = 'heard' | 'held'

/** How a moved child goes on: it continues its open turn (which the host recorded as begun when it published the child). */
export type MovePoint = { concluded: boolean }

export interface Whereabouts {
  events: readonly SessionEvent[]
  /** Where the child's own events begin (after a fork seed). */
  from: number
  ledger: CallLedger
  /** Its provider is a host-placed model: its next step's request is the host's, not module code. */
  hostModel: boolean
  hooks: RunnerHooks
  /** Tool calls of one step its loop runs at once. */
  maxParallel: number
  /**
   * Whether a call of this name, which the host never ran, runs no module code on the runner
   * (the structured-output runtime's `structured_output`): made again on the new runner.
   */
  runsNoModuleCode(name: string): boolean
  mobility: Mobility
}

export function movePoint(where: Whereabouts): MovePoint | undefined {
  const { events, from, ledger, hooks } = where
  // Nothing of the module runs before the next host model request: no beforeStep hook, a host model.
  // Only when every frame was heard: a lost frame may hide the module code that began after it.
  const betweenSteps = where.mobility === 'heard' && where.hostModel && hooks !== undefined && !hooks.has('beforeStep')
  let start = events.length - 1
  while (start >= from && events[start]!.type !== 'turn/start' && events[start]!.type !== 'turn/end') start--
  // No turn: not published (the host records a turn's start as it publishes), so not running.
  if (start < from) return undefined
  // Its turn ended: only the runner's last word was lost, and moving would run it again.
  if (events[start]!.type === 'turn/end') return undefined
  if (ledger.models > 0) return { concluded: false }

  let calls: ToolCallBlock[] | undefined
  let structured = false
  for (let i = start + 1; i < events.length; i++) {
    const event = events[i]!
    if (event.type === 'assistant/message') {
      calls = event.data.content.filter((block): block is ToolCallBlock => block.type === 'tool-call')
      structured = false
    } else if (event.type === 'tool/result' && calls) {
      calls = calls.slice(1)
      if (event.data.name === 'structured_output' && !event.data.isError) structured = true
    }
  }
  // No step yet, or its model request returned and nothing after it began.
  if (calls === undefined) return betweenSteps ? { concluded: false } : undefined
  const concluded = ledger.concluded || structured
  const held = where.mobility === 'held'
  // A step whose message has no calls ends the turn: only its end was lost.
  if (calls.length === 0 && !hasResults(events, start)) return undefined
  if (calls.length === 0) return betweenSteps || (concluded && !held) ? { concluded } : undefined

  // Calls start in order: those that began are a prefix of the ones without a result, and each
  // must be a host tool (in flight, or done with no afterTool hook to run on its result), or a
  // call the runner answers without module code (made again on the new runner), when no
  // afterTool hook reads its result.
  const noHook = hooks !== undefined && !hooks.has('afterTool')
  let began = 0
  let inFlight = 0
  // The k-th call of an id without a result is the k-th run of that id (a model may repeat an id in a step).
  const seen = new Map<string, number>()
  for (const call of calls) {
    const k = seen.get(call.id) ?? 0
    seen.set(call.id, k + 1)
    const run = ledger.runsOf(call.id)[k]
    if (!run && noHook && where.runsNoModuleCode(call.name)) {
      began++
      continue
    }
    if (!run || run.name !== call.name) break
    if (run.done && (hooks === undefined || hooks.has('afterTool'))) return undefined
    if (!run.done) inFlight++
    began++
  }
  // A step whose host tools are all done may have gone on in frames that were lost.
  if (held && inFlight === 0) return undefined
  // The rest never began when every slot of its loop holds a host tool still running.
  if (began === calls.length || inFlight >= where.maxParallel) return { concluded }
  return undefined
}

/** Whether the last step (its message is the last `assistant/message` after `start`) has any results. */
function hasResults(events: readonly SessionEvent[], start: number): boolean {
  for (let i = events.length - 1; i > start; i--) {
    if (events[i]!.type === 'tool/result') return true
    if (events[i]!.type === 'assistant/message') return false
  }
  return false
}
