/**
 * Helpers for the driver part of the contract suite (§1 start, §2 run, §3 result, §5 fork,
 * §7 lifecycle). They observe children only through public surfaces, and never assume that
 * events from a child arrive synchronously.
 */
import { expect } from 'vitest'
import { textResponse, type AgentView, type Host, type SessionEvent, type SessionStore, type SubagentEndEvent, type SubagentRun, type SubagentStartEvent } from 'subagent-worker'
import { tick, type Fixture } from './harness.js'
import { Watch } from './watch.js'

export const PRE_PUBLICATION = 'subagent request was aborted before child publication'
export const MAX_DEPTH_MESSAGE = 'subagent maxDepth must be a non-negative safe integer'
export const SUBAGENT_DEPTH_MESSAGE = 'agent subagentDepth must be a non-negative safe integer'
export const SAFE_RANGE_MESSAGE = 'subagent child depth exceeds the safe-integer range'

/** The first event of `type` the host records for `run`, already recorded or when it comes (run.events()). */
export async function eventOf(run: SubagentRun, type: SessionEvent['type']): Promise<SessionEvent> {
  for await (const event of run.events()) if (event.type === type) return event
  throw new Error(`the child ended without a ${type} event`)
}

/** Resolves once the events the host recorded for `run` satisfy `holds` (run.events(), so ones recorded before the call count). */
export async function eventsUntil(run: SubagentRun, what: string, holds: (events: readonly SessionEvent[]) => boolean): Promise<void> {
  const seen: SessionEvent[] = []
  for await (const event of run.events()) {
    seen.push(event)
    if (holds(seen)) return
  }
  throw new Error(`the child ended before ${what}`)
}

/** The rejection reason of `promise`; fails if it fulfils. */
export async function rejectionOf(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise
  } catch (error) {
    return error as Error
  }
  throw new Error('expected the promise to reject, but it fulfilled')
}

/** Records every lifecycle event of a host, in emission order; `ended(n)` resolves once `n` ends were recorded. */
export function recordLifecycle(host: Host): {
  starts: SubagentStartEvent[]
  ends: SubagentEndEvent[]
  order: Array<['start' | 'end', string]>
  ended(n: number): Promise<void>
} {
  const starts: SubagentStartEvent[] = []
  const ends: SubagentEndEvent[] = []
  const order: Array<['start' | 'end', string]> = []
  const watch = new Watch()
  host.on('subagent/start', (info) => {
    starts.push(info)
    order.push(['start', info.runId])
  })
  host.on('subagent/end', (info) => {
    ends.push(info)
    order.push(['end', info.runId])
    watch.changed()
  })
  return { starts, ends, order, ended: (n) => watch.until(`${n} subagent/end events`, () => ends.length >= n) }
}

/** The host's copy of a published child's events (complete once its result settled). */
export function childEvents(host: Host, run: SubagentRun): readonly SessionEvent[] {
  const view = host.agents.get(run.id)
  if (!view) throw new Error(`child ${run.id} is not in host.agents`)
  return view.session.events
}

export function childView(host: Host, run: SubagentRun): AgentView {
  const view = host.agents.get(run.id)
  if (!view) throw new Error(`child ${run.id} is not in host.agents`)
  return view
}

/** Turn-end reasons of a session's events. */
export function turnEnds(events: readonly SessionEvent[]): unknown[] {
  return events.filter((e) => e.type === 'turn/end').map((e) => (e.data as { reason: unknown }).reason)
}

/**
 * Asserts the rejected start left nothing behind: only the expected agents in `host.agents`,
 * no session besides theirs in the store, no model request spent.
 */
export async function expectNothingPublished(
  fixture: Pick<Fixture, 'host' | 'model'>,
  options: { store?: SessionStore; agents?: string[] } = {},
): Promise<void> {
  const { host, model } = fixture
  const agents = options.agents ?? []
  // An absence check: let any stray asynchronous work (store writes, streamed events) land before looking.
  await tick(20)
  expect(host.agents.list().map((a) => a.id).sort()).toEqual([...agents].sort())
  if (options.store) {
    const stored = (await options.store.list()).sessions.map((h) => h.id).filter((id) => !agents.includes(id))
    expect(stored).toEqual([])
  }
  expect(model.requests.length).toBe(0)
}

/** A parent that was not created by any host: any `{ id, options, session: { header, events } }` is valid. */
export function foreignParent(
  init: { id?: string; options?: Record<string, unknown>; header?: Record<string, unknown>; events?: SessionEvent[] } = {},
): AgentView {
  const id = init.id ?? 'foreign-parent'
  return {
    id,
    options: (init.options ?? { provider: 'scripted', model: 'scripted-1' }) as AgentView['options'],
    session: { header: { id, createdAt: '2026-01-01T00:00:00.000Z', ...init.header }, events: init.events ?? [] },
  }
}

/** Collects process warnings with a given code while a test runs; `warned()` resolves once one was. */
export function captureWarnings(code: string): { warnings: Error[]; warned(): Promise<void>; stop(): void } {
  const warnings: Error[] = []
  const watch = new Watch()
  const listener = (warning: Error & { code?: string }) => {
    if (warning.code !== code) return
    warnings.push(warning)
    watch.changed()
  }
  process.on('warning', listener)
  return { warnings, warned: () => watch.until(`a ${code} warning`, () => warnings.length > 0), stop: () => void process.off('warning', listener) }
}

/** Names of the tools a model request offered. */
export function toolNames(request: { tools?: Array<{ name: string }> }): string[] {
  return (request.tools ?? []).map((t) => t.name)
}

/**
 * Cancels a child of `parent` while its host model streams, and checks that the host's record
 * and the runner's stayed in step: the model sends one delta, and once the child was cancelled
 * goes on streaming (the host reads on until the runner's cancel comes back, and these come
 * before any message can). The child ends aborted with the text sent before the abort, one chunk
 * event, no gap; what the model streamed after the abort was neither sent nor recorded.
 */
export async function expectCancelledMidStream(host: Host, parent: Parameters<Host['spawn']['start']>[0]['parent']): Promise<void> {
  let open!: () => void
  const more = new Promise<void>((resolve) => (open = resolve))
  const after: string[] = []
  host.models.register('mid-stream', {
    async *stream() {
      yield { type: 'text-delta', text: 'before the abort' }
      await more
      for (const text of ['after', 'the', 'abort']) {
        after.push(text)
        yield { type: 'text-delta', text }
      }
      yield* textResponse('never')
    },
  })
  const leaving = new AbortController()
  const child = await host.spawn.start({ prompt: 'go', parent, signal: leaving.signal, agentOptions: { provider: 'mid-stream' } })
  await eventOf(child, 'assistant/chunk')
  leaving.abort(new Error('enough'))
  open()
  expect(await child.result).toMatchObject({ stopReason: 'aborted', output: [{ type: 'text', text: 'before the abort' }] })
  expect(after.length).toBeGreaterThan(0)
  const events = host.agents.get(child.id)!.session.events
  expect(events.filter((event) => event.type === 'assistant/chunk')).toHaveLength(1)
  expect(events.map((event) => event.seq)).toEqual(events.map((_, seq) => seq))
  expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: { kind: 'aborted' } } })
  await child.dispose()
}
