/**
 * CONTRACT.md §8 and §9: what the pooled transports add. Faults are contained: each way a runner
 * (a worker thread, a child process) can die settles the run with a diagnostic naming the cause,
 * keeps what the child emitted, leaves other children running, and the pool carries on.
 */
import { getPriority } from 'node:os'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { eventOf, eventsUntil } from '../support/driver-helpers.js'
import { POOLED } from '../support/harness.js'
import { closeWorkerHosts, workerHost as hostOn } from '../support/worker-host.js'
import { RUNNER_YOUNG_GENERATION_MB } from '../../dist/parent/runners/endpoints/worker-thread.js'
import { defineTool, ScriptedModel, textResponse, toolCallResponse, toolCallsResponse, type HostOptions, type ScriptEntry, type SubagentRun } from 'subagent-worker'

const FAULT_MODULE = fileURLToPath(new URL('../fixtures/fault-module.mjs', import.meta.url))
const NEVER_LOADS = fileURLToPath(new URL('../fixtures/never-loads-module.mjs', import.meta.url))
afterEach(closeWorkerHosts)

const signal = () => new AbortController().signal

/**
 * Resolves once the host holds the `assistant/message` asking for the child's tool call. A
 * module tool runs only once everything its child recorded before has been sent, in the same
 * turn as that send (src/worker/flushing.ts): by then the tool is running, spinning or burning.
 */
async function untilToolRuns(run: SubagentRun): Promise<void> {
  await eventOf(run, 'assistant/message')
}

describe.each(POOLED)('%s transport: faults are contained', (isolation) => {
  const workerHost = (script: ScriptEntry[], options: HostOptions = {}) => hostOn(FAULT_MODULE, script, { isolation, ...options })
  /** What stopping a runner is called in its diagnostics. */
  const stopped = isolation === 'worker' ? 'terminated' : 'killed'

  it('a spinning child is terminated after abortGraceMs and settles aborted, saying so', async () => {
    const { host, parent } = workerHost([toolCallResponse('c1', 'spin', {}, 'spinning now')])
    const controller = new AbortController()
    const run = await host.spawn.start({ prompt: 'spin', parent, signal: controller.signal })
    await untilToolRuns(run)
    const aborted = performance.now()
    controller.abort()
    const result = await run.result
    const elapsed = performance.now() - aborted
    expect(result.stopReason).toBe('aborted')
    expect(result.diagnostic).toMatch(new RegExp(`did not stop within abortGraceMs \\(200 ms\\).*${stopped}`))
    expect(result.output).toEqual([
      { type: 'text', text: 'spinning now' },
      { type: 'tool-call', id: 'c1', name: 'spin', arguments: '{}' },
    ])
    // The grace was given in full before the runner was stopped (a timer may fire a tick early).
    // No upper bound beyond a runaway one: how late the stop lands is the machine's load.
    expect(elapsed).toBeGreaterThanOrEqual(200 - 2)
    expect(elapsed).toBeLessThan(200 + 10_000)
    await run.dispose()
  })

  // CONTRACT.md §7: the turn records the caller's reason, unchanged, however the child was then stopped; the result's diagnostic says how.
  it.for([
    ['a plain abort', undefined, { kind: 'parent' }],
    ["the caller's own reason", new DOMException('the caller gave up', 'TimeoutError'), undefined],
    ["the caller's own reason that cannot be cloned", function uncloneable() {}, undefined],
  ] as const)("a terminated child's stored transcript ends with the end of its turn, for %s: nothing shown is missing on disk", async ([, given, recorded]) => {
    const { host, parent, store } = workerHost([toolCallResponse('c1', 'spin', {})])
    const controller = new AbortController()
    const run = await host.spawn.start({ prompt: 'spin', parent, signal: controller.signal })
    await untilToolRuns(run)
    controller.abort(given)
    const { stopReason, diagnostic } = await run.result
    expect(stopReason).toBe('aborted')
    expect(diagnostic).toMatch(new RegExp(`did not stop within abortGraceMs \\(200 ms\\).*${stopped}`))
    const mirrored = [...host.agents.get(run.id)!.session.events]
    await run.dispose()
    const stored = (await store.read(run.id))!.events
    expect(stored).toEqual(mirrored)
    expect(stored.at(-1)).toEqual({ seq: stored.length - 1, type: 'turn/end', data: { reason: { kind: 'aborted', reason: recorded ?? given } } })
    // The host's copy holds the very value the caller gave.
    if (given) expect((mirrored.at(-1)!.data as { reason: { reason: unknown } }).reason.reason).toBe(given)
  })

  it.each([
    ['process.exit', 'exit', { code: 7 }, /exited with code 7/],
    ['an uncaught error from a timer', 'timer_throw', {}, /uncaught Error: timer boom/],
    ['an unhandled rejection', 'unhandled_rejection', {}, /nobody handles this/],
  ])('%s settles error with a diagnostic naming the cause, keeping what was emitted', async (_, tool, args, diagnostic) => {
    // A module tool of the same step holds the child in module code when the runner goes: a child
    // waiting on the host would be moved instead (moves.test.ts).
    const { host, parent, store } = workerHost([
      toolCallsResponse(
        [
          { id: 'c1', name: tool, args },
          { id: 'c2', name: 'hold', args: {} },
        ],
        'about to fail',
      ),
    ])
    const run = await host.spawn.start({ prompt: 'fail', parent, signal: signal() })
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toMatch(diagnostic)
    const events = host.agents.get(run.id)!.session.events
    const types = events.map((e) => e.type)
    expect(types.slice(0, 4)).toEqual(['turn/start', 'user/message', 'subagent/descriptor', 'assistant/chunk'])
    expect(types).toContain('assistant/message')
    expect(result.output).toEqual([
      { type: 'text', text: 'about to fail' },
      { type: 'tool-call', id: 'c1', name: tool, arguments: JSON.stringify(args) },
      { type: 'tool-call', id: 'c2', name: 'hold', arguments: '{}' },
    ])
    await run.dispose()
    // Nothing already emitted is lost: the store has every event the host saw.
    expect((await store.read(run.id))!.events).toEqual(events)
  })

  it('a heap-limit death settles error with a diagnostic naming the memory limit', async () => {
    const { host, parent } = workerHost([toolCallResponse('c1', 'hog_memory', {})], {
      pool: { resourceLimits: { maxOldGenerationSizeMb: 24, maxYoungGenerationSizeMb: 8 } },
    })
    const run = await host.spawn.start({ prompt: 'hog', parent, signal: signal() })
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toMatch(/out of memory/)
    await run.dispose()
  })

  if (isolation === 'worker') {
    /** The resource limits of the thread a child's module tool ran on. */
    const limitsOn = async (options: HostOptions) => {
      const { run } = workerHost([toolCallResponse('l', 'limits', {}), textResponse('done')], options)
      const { events } = await run()
      return events.find((event) => event.type === 'tool/result')!.data.value as Record<string, number>
    }

    // Node 20 and 22 give a worker thread this young generation themselves; Node 24 gives 192 MB,
    // so there the first two checks fail without the cap.
    it("a runner thread's young generation is capped unless pool.resourceLimits says otherwise", async () => {
      expect((await limitsOn({})).maxYoungGenerationSizeMb).toBe(RUNNER_YOUNG_GENERATION_MB)
      const old = await limitsOn({ pool: { resourceLimits: { maxOldGenerationSizeMb: 512 } } })
      expect(old).toMatchObject({ maxYoungGenerationSizeMb: RUNNER_YOUNG_GENERATION_MB, maxOldGenerationSizeMb: 512 })
      expect((await limitsOn({ pool: { resourceLimits: { maxYoungGenerationSizeMb: 8 } } })).maxYoungGenerationSizeMb).toBe(8)
    })
  }

  /** The nice value of the runner a child's module tool ran on (on Linux, its thread's own). */
  const niceOn = async (options: HostOptions) => {
    const { run } = workerHost([toolCallResponse('n', 'nice', {}), textResponse('done')], options)
    const { events } = await run()
    return (events.find((event) => event.type === 'tool/result')!.data.value as { nice: number }).nice
  }

  // A worker thread has a nice value of its own only on Linux; elsewhere the host leaves it be.
  const lowered = isolation === 'process' || process.platform === 'linux'

  it('pool.niceIncrement schedules each runner that much lower than the host, at most 19; by default a runner is as the host', async () => {
    const host = getPriority()
    expect(await niceOn({})).toBe(host)
    expect(await niceOn({ pool: { niceIncrement: 0 } })).toBe(host)
    expect(await niceOn({ pool: { niceIncrement: 5 } })).toBe(lowered ? Math.min(19, host + 5) : host)
    expect(await niceOn({ pool: { niceIncrement: 19 } })).toBe(lowered ? 19 : host)
    // Only the runners: the host's own thread is where it was.
    expect(getPriority()).toBe(host)
  })

  it('children on other workers carry on while one crashes, and the pool replaces the dead worker', async () => {
    const { host, parent } = workerHost([textResponse('after the crash')], { pool: { minThreads: 2, maxThreads: 2 } })
    // Each concurrent child has a model of its own: a shared script's order would depend on timing.
    host.models.register('slow', new ScriptedModel([{ delayMs: 300, chunks: textResponse('slow and fine') }]))
    host.models.register('crash', new ScriptedModel([toolCallResponse('c1', 'exit', { code: 3 })]))
    const slow = await host.spawn.start({ prompt: 'slow', parent, signal: signal(), agentOptions: { provider: 'slow' } })
    const crash = await host.spawn.start({ prompt: 'crash', parent, signal: signal(), agentOptions: { provider: 'crash' } })
    expect((await crash.result).stopReason).toBe('error')
    expect(await slow.result).toEqual({ output: [{ type: 'text', text: 'slow and fine' }], usage: { inputTokens: 0, outputTokens: 4 }, totalUsage: { inputTokens: 0, outputTokens: 4 }, stopReason: 'completed' })
    const next = await host.spawn.start({ prompt: 'again', parent, signal: signal() })
    expect((await next.result).stopReason).toBe('completed')
    await Promise.all([slow.dispose(), crash.dispose(), next.dispose()])
    expect(host.agents.list().map((a) => a.id)).toEqual([parent.id])
  })

  it('with childrenPerWorker > 1, terminating a stuck child moves a sibling waiting on the host to another runner, saying why', async () => {
    const { host, parent } = workerHost(['hang', toolCallResponse('c1', 'spin', {}), textResponse('after the move')], {
      pool: { minThreads: 1, maxThreads: 1, childrenPerWorker: 2 },
    })
    // The sibling first: once the other child spins, the shared thread cannot build anything.
    const sibling = await host.spawn.start({ prompt: 'wait', parent, signal: signal() })
    // Its model request streamed 'partial' and holds.
    await eventOf(sibling, 'assistant/chunk')
    const stuck = new AbortController()
    const spinning = await host.spawn.start({ prompt: 'spin', parent, signal: stuck.signal })
    await untilToolRuns(spinning)
    stuck.abort()
    const [stuckResult, siblingResult] = await Promise.all([spinning.result, sibling.result])
    expect(stuckResult.stopReason).toBe('aborted')
    expect(stuckResult.diagnostic).toContain(stopped)
    // Its held request is made again on the new runner: what it had streamed ('partial') does not count.
    expect(siblingResult).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'after the move' }] })
    const moves = host.agents.get(sibling.id)!.session.events.filter((e) => e.type === 'child/moved')
    expect(moves).toEqual([expect.objectContaining({ data: { reason: expect.stringContaining(`sibling subagent ${spinning.id}`) } })])
    await Promise.all([spinning.dispose(), sibling.dispose()])
  })

  it('a moved child no model reported usage for ends with no totalUsage (CONTRACT.md §12: absent when none reported any)', async () => {
    const { host, parent } = workerHost(['hang', toolCallResponse('c1', 'spin', {}), 'hang'], {
      pool: { minThreads: 1, maxThreads: 1, childrenPerWorker: 2 },
    })
    const held = new AbortController()
    const sibling = await host.spawn.start({ prompt: 'wait', parent, signal: held.signal })
    await eventOf(sibling, 'assistant/chunk')
    const stuck = new AbortController()
    const spinning = await host.spawn.start({ prompt: 'spin', parent, signal: stuck.signal })
    await untilToolRuns(spinning)
    stuck.abort()
    await spinning.result
    // Moved, its request made again: it streams 'partial' once more and holds until aborted.
    await eventsUntil(sibling, 'the request made again', (events) => {
      const moved = events.findIndex((e) => e.type === 'child/moved')
      return moved >= 0 && events.slice(moved).some((e) => e.type === 'assistant/chunk')
    })
    held.abort()
    const result = await sibling.result
    expect(result.stopReason).toBe('aborted')
    expect(result).not.toHaveProperty('usage')
    expect(result).not.toHaveProperty('totalUsage')
    await Promise.all([spinning.dispose(), sibling.dispose()])
  })

  it('a host tool waiting on its signal is released when the worker dies mid-call', async () => {
    const { host, parent } = workerHost([
      toolCallsResponse([
        { id: 'h', name: 'host_wait', args: {} },
        { id: 'x', name: 'exit', args: { code: 9 } },
      ]),
    ])
    let release = () => {}
    const released = new Promise<void>((resolve) => (release = resolve))
    host.tools.register(
      defineTool({
        name: 'host_wait',
        description: 'Waits until cancelled.',
        parameters: { type: 'object', properties: {} },
        execute: (_args, exec) =>
          new Promise((resolve) => {
            exec.signal.addEventListener(
              'abort',
              () => {
                release()
                resolve('released')
              },
              { once: true },
            )
          }),
      }),
    )
    const run = await host.spawn.start({ prompt: 'go', parent, signal: signal() })
    const result = await run.result
    expect(result.diagnostic).toMatch(/exited with code 9/)
    await released
    await run.dispose()
  })

  it('disposing a finished child never disturbs a busy child that took its thread', async () => {
    const { host, parent } = workerHost([textResponse('first'), toolCallResponse('b', 'burn', { ms: 400 }), textResponse('second done')], {
      abortGraceMs: 20,
      pool: { minThreads: 1, maxThreads: 1 },
    })
    const first = await host.spawn.start({ prompt: 'one', parent, signal: signal() })
    await first.result // its task ended: the thread is free for the next child
    const second = await host.spawn.start({ prompt: 'two', parent, signal: signal() })
    await untilToolRuns(second) // the second child is burning CPU on that thread
    await first.dispose()
    expect(await second.result).toEqual({ output: [{ type: 'text', text: 'second done' }], usage: { inputTokens: 0, outputTokens: 6 }, totalUsage: { inputTokens: 0, outputTokens: 6 }, stopReason: 'completed' })
    await second.dispose()
  })

  it('a worker start still waiting when the host closes is rejected as closed, not as a crash', async () => {
    const { host, parent } = workerHost(['hang', 'hang'], { pool: { minThreads: 1, maxThreads: 1, maxQueue: 1 } })
    const running = await host.spawn.start({ prompt: 'one', parent, signal: signal() })
    const waiting = host.spawn.start({ prompt: 'two', parent, signal: signal() })
    const refused = expect(waiting).rejects.toThrow(/the host (is|was) closed/)
    // The second start is queued for a slot once a third, started after it, finds the queue full.
    await expect(host.spawn.start({ prompt: 'three', parent, signal: signal() })).rejects.toThrow(/pool\.maxQueue \(1\) starts already wait/)
    await host.close()
    await refused
    expect((await running.result).stopReason).toBe('aborted')
  })

  it('a runner whose agent module never finishes loading is stopped after pool.loadTimeoutMs: the start fails saying so, never hangs', async () => {
    const { host, parent } = hostOn(NEVER_LOADS, [textResponse('never')], { isolation, pool: { minThreads: 0, maxThreads: 1, loadTimeoutMs: 300, env: { SUBAGENT_NEVER_LOAD: '1' } } })
    const failure = await host.spawn.start({ prompt: 'go', parent, signal: signal() }).then(
      () => expect.unreachable('a child on a runner that never loaded was published'),
      (error: unknown) => error,
    )
    const runner = isolation === 'worker' ? 'worker thread' : 'child process'
    expect(failure).toMatchObject({
      code: 'ERR_SUBAGENT_RUNNER_LOST',
      message: expect.stringMatching(new RegExp(`^the ${runner} \\d+ did not finish loading the agent module within 300 ms \\(pool\\.loadTimeoutMs\\): its top-level code never completed \\(an await that never settles, or code that never yields\\), so it was ${stopped}$`)),
    })
    expect(host.agents.list()).toEqual([parent])
  })

  it('a module model that kills its thread on the first pull loses none of the events before it', async () => {
    const { host, parent } = workerHost([])
    const run = await host.spawn.start({ prompt: 'x', parent, signal: signal(), agentOptions: { provider: 'exit-model' } })
    expect((await run.result).diagnostic).toMatch(/exited with code 9/)
    const events = host.agents.get(run.id)!.session.events
    // Everything the child recorded, then the turn's end the host recorded for it, with why.
    expect(events.map((e) => e.type)).toEqual(['turn/start', 'user/message', 'subagent/descriptor', 'turn/end'])
    expect(events.at(-1)!.data).toEqual({ reason: { kind: 'error', message: expect.stringMatching(/exited with code 9/) } })
    await run.dispose()
  })

  it('text a module model streamed before it spun still counts as output after the termination', async () => {
    const { host, parent } = workerHost([])
    const controller = new AbortController()
    const run = await host.spawn.start({ prompt: 'x', parent, signal: controller.signal, agentOptions: { provider: 'stream-then-spin' } })
    await eventOf(run, 'assistant/chunk')
    controller.abort()
    const result = await run.result
    expect(result.stopReason).toBe('aborted')
    expect(result.output).toEqual([{ type: 'text', text: 'partial answer' }])
    await run.dispose()
  })
})

