/**
 * Helpers for the loop (§2a) and structured-output (§4) contract tests. Everything here observes
 * children only through public surfaces: the host's view of a child, the run's result, the
 * scripted model's recorded requests and host-placed tools (which always run in the main thread).
 */
import { defineTool, type AgentView, type Host, type SessionEvent, type SubagentResult, type SubagentRun, type SubagentStartRequest } from 'subagent-worker'
import { signal as freshSignal, type Fixture } from './harness.js'
import { Watch } from './watch.js'

export interface ChildOutcome {
  run: SubagentRun
  result: SubagentResult
  /** The host's copy of the child's session events, read after the result settled. */
  events: readonly SessionEvent[]
  view: AgentView
}

/** Spawns a child of the fixture's parent, waits for its result and returns its events. */
export async function spawnChild(fixture: Fixture, request: Partial<SubagentStartRequest> = {}): Promise<ChildOutcome> {
  const { host, parent } = fixture
  const run = await host.spawn.start({ prompt: 'do the task', parent, signal: freshSignal(), ...request })
  const result = await run.result
  const view = host.agents.get(run.id)
  if (!view) throw new Error(`child ${run.id} is not in host.agents after its result settled`)
  return { run, result, events: view.session.events, view }
}

/** Runs one turn of a top-level agent and returns its events. */
export async function runTopLevel(agent: ReturnType<Host['createAgent']>, message = 'go'): Promise<readonly SessionEvent[]> {
  agent.followup(message)
  await agent.whenIdle()
  return agent.session.events
}

export function turnEnds(events: readonly SessionEvent[]): Array<{ kind: string; message?: string; reason?: unknown }> {
  return events.filter((e) => e.type === 'turn/end').map((e) => (e.data as { reason: { kind: string; message?: string; reason?: unknown } }).reason)
}

export function lastTurnEnd(events: readonly SessionEvent[]): { kind: string; message?: string; reason?: unknown } | undefined {
  return turnEnds(events).at(-1)
}

export interface ToolResultRecord {
  callId: string
  name: string
  isError: boolean
  code?: string
  content: Array<{ type: string; text?: string }>
  value?: unknown
}

export function toolResults(events: readonly SessionEvent[]): ToolResultRecord[] {
  return events.filter((e) => e.type === 'tool/result').map((e) => e.data as ToolResultRecord)
}

/** A host tool that records each call's arguments and returns `echo:<text>`. */
export function echoTool(name = 'echo', extra: { needsApproval?: boolean; description?: string } = {}) {
  const calls: Array<Record<string, unknown>> = []
  const tool = defineTool({
    name,
    description: extra.description ?? `Echoes its text (${name}).`,
    parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'], additionalProperties: false },
    ...(extra.needsApproval === undefined ? {} : { needsApproval: extra.needsApproval }),
    execute(args) {
      calls.push(args)
      return `echo:${String(args['text'])}`
    },
  })
  return { tool, calls }
}

/** A manually released promise. */
export function gate(): { promise: Promise<void>; open(): void } {
  let open = () => {}
  const promise = new Promise<void>((resolve) => {
    open = resolve
  })
  return { promise, open }
}

/**
 * A host tool whose calls wait for the test to release them by tag, while counting how many run
 * at once. Finish order is decided by the test, never by timers.
 */
export function gatedTool(name = 'gated') {
  const gates = new Map<string, ReturnType<typeof gate>>()
  const gateFor = (tag: string) => {
    let g = gates.get(tag)
    if (!g) gates.set(tag, (g = gate()))
    return g
  }
  const state = { active: 0, peak: 0, started: [] as string[], finished: [] as string[] }
  const watch = new Watch()
  const tool = defineTool({
    name,
    description: 'Waits until the test releases it.',
    parameters: { type: 'object', properties: { tag: { type: 'string' } }, required: ['tag'], additionalProperties: false },
    async execute(args) {
      const tag = String(args['tag'])
      state.active++
      state.peak = Math.max(state.peak, state.active)
      state.started.push(tag)
      watch.changed()
      try {
        await gateFor(tag).promise
      } finally {
        state.active--
        state.finished.push(tag)
        watch.changed()
      }
      return `done:${tag}`
    },
  })
  return {
    tool,
    state,
    release: (tag: string) => gateFor(tag).open(),
    /** Resolves once `holds` is true of the calls' state, now or after a call starts or finishes. */
    until: (what: string, holds: (now: typeof state) => boolean) => watch.until(what, () => holds(state)),
  }
}
