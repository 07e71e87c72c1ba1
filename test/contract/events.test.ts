/**
 * CONTRACT.md §12: `run.events()` reads the host's copy of a child's session, recorded then live,
 * and ends once the run has settled; `host.on('subagent/event')` sees every event of every child.
 * On every transport: the mirror is fed the same way whichever carries the events.
 */
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { randomBytes } from 'node:crypto'
import { createHost, ScriptedModel, type HostOptions, type ScriptEntry, type SessionEvent, type StreamChunk, type SubagentRun } from 'subagent-worker'
import { bullmqTransport } from 'subagent-worker/bullmq'
import { BULLMQ, closeHosts, hostOptions, ownRunnerOptions, POOLED, setup, signal, TRANSPORTS, type TransportName } from '../support/harness.js'
import { startTestNode } from '../support/nodes.js'

afterEach(closeHosts)

const FAULT_MODULE = fileURLToPath(new URL('../fixtures/fault-module.mjs', import.meta.url))

/** A reply streamed as `n` separate deltas. */
function streamed(n: number, tag: string): StreamChunk[] {
  const deltas = Array.from({ length: n }, (_, i): StreamChunk => ({ type: 'text-delta', text: `${tag}.${i} ` }))
  return [...deltas, { type: 'usage', inputTokens: 3, outputTokens: n }, { type: 'finish', reason: 'stop' }]
}

async function collect(events: AsyncIterable<SessionEvent>, eachAfter?: () => Promise<void>): Promise<SessionEvent[]> {
  const seen: SessionEvent[] = []
  for await (const event of events) {
    seen.push(event)
    if (eachAfter) await eachAfter()
  }
  return seen
}

/** A consumer slower than the child: it yields to the event loop twice per event. */
const slowly = () => new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve)))

/** Reads `run`'s events until one matches, then leaves the loop. */
async function readUntil(run: SubagentRun, match: (event: SessionEvent) => boolean): Promise<SessionEvent> {
  for await (const event of run.events()) if (match(event)) return event
  throw new Error('the run ended before the event came')
}

describe.each(TRANSPORTS)('%s transport: watching a child', (transport) => {
  it('200 streaming children, each read by a fast and a slow reader and a host listener: every event once, in order', { timeout: 120_000 }, async () => {
    const CHILDREN = 200
    const { host, parent } = setup(transport, Array.from({ length: CHILDREN }, (_, i) => streamed(12, `c${i}`)))
    const heard = new Map<string, SessionEvent[]>()
    host.on('subagent/event', ({ runId, id, event }) => {
      expect(runId).toBe(id)
      heard.set(id, [...(heard.get(id) ?? []), event])
    })
    const runs = await Promise.all(Array.from({ length: CHILDREN }, () => host.spawn.start({ prompt: 'stream', parent, signal: signal() })))
    const reads = runs.map((run) => Promise.all([collect(run.events()), collect(run.events(), slowly)]))
    const results = await Promise.all(runs.map((run) => run.result))
    const read = await Promise.all(reads)
    for (const [i, run] of runs.entries()) {
      expect(results[i]!.stopReason).toBe('completed')
      const mirrored = host.agents.get(run.id)!.session.events
      expect(mirrored.map((e) => e.seq)).toEqual(mirrored.map((_, seq) => seq))
      const [fast, slow] = read[i]!
      expect(fast).toEqual(mirrored)
      expect(slow).toEqual(mirrored)
      // The same objects: a reader holds a place in the host's copy, not copies of its own.
      expect(slow.every((event, seq) => event === mirrored[seq])).toBe(true)
      expect(heard.get(run.id)).toEqual(mirrored)
    }
    await Promise.all(runs.map((run) => run.dispose()))
  })

  it('from: starts at that seq, whether recorded already or still to come', async () => {
    const { host, parent } = setup(transport, [{ hangAfter: [{ type: 'text-delta', text: 'thinking' }] }])
    const controller = new AbortController()
    const run = await host.spawn.start({ prompt: 'hang', parent, signal: controller.signal })
    const chunk = await readUntil(run, (e) => e.type === 'assistant/chunk')
    const fromChunk = collect(run.events({ from: chunk.seq }))
    const fromFuture = collect(run.events({ from: chunk.seq + 2 }))
    controller.abort()
    expect((await run.result).stopReason).toBe('aborted')
    const mirrored = host.agents.get(run.id)!.session.events
    expect(await fromChunk).toEqual(mirrored.slice(chunk.seq))
    expect(await fromFuture).toEqual(mirrored.slice(chunk.seq + 2))
    expect(await collect(run.events({ from: mirrored.length + 5 }))).toEqual([])
    expect(() => run.events({ from: -1 })).toThrow(/from must be a non-negative safe integer/)
    await run.dispose()
  })

  it('leaving early releases the reader: a pending next() ends at return(), others read on', async () => {
    const { host, parent } = setup(transport, [{ hangAfter: [{ type: 'text-delta', text: 'thinking' }] }])
    const controller = new AbortController()
    const run = await host.spawn.start({ prompt: 'hang', parent, signal: controller.signal })
    const whole = collect(run.events())
    await readUntil(run, (e) => e.type === 'assistant/chunk')
    const iterator = run.events()[Symbol.asyncIterator]()
    const recorded = host.agents.get(run.id)!.session.events.length
    for (let i = 0; i < recorded; i++) expect((await iterator.next()).done).toBe(false)
    const pending = iterator.next() // nothing more until the abort: it waits
    await expect(iterator.return!()).resolves.toEqual({ done: true, value: undefined })
    await expect(pending).resolves.toEqual({ done: true, value: undefined })
    await expect(iterator.next()).resolves.toEqual({ done: true, value: undefined })
    controller.abort()
    await run.result
    expect(await whole).toEqual(host.agents.get(run.id)!.session.events)
    await run.dispose()
  })

  it('after dispose: yields what was recorded, then ends', async () => {
    const { host, parent } = setup(transport, [streamed(5, 'done')])
    const run = await host.spawn.start({ prompt: 'go', parent, signal: signal() })
    await run.result
    const mirrored = [...host.agents.get(run.id)!.session.events]
    await run.dispose()
    expect(host.agents.get(run.id)).toBeUndefined()
    expect(await collect(run.events())).toEqual(mirrored)
    expect(await collect(run.events({ from: 2 }))).toEqual(mirrored.slice(2))
  })

  it('a throwing subagent/event listener is reported, never propagated', async () => {
    const { host, parent } = setup(transport, [streamed(3, 'ok')])
    const warned = new Promise<Error>((resolve) => process.once('warning', resolve))
    host.on('subagent/event', () => {
      throw new Error('listener boom')
    })
    const result = await host.spawn.run({ prompt: 'go', parent, signal: signal() })
    expect(result.stopReason).toBe('completed')
    const warning = await warned
    expect(warning.message).toMatch(/a 'subagent\/event' listener threw: listener boom/)
    expect(warning).toMatchObject({ code: 'SUBAGENT_LISTENER_ERROR' })
  })
})

/** A host on `options`' transport with the fault module, its scripted model and a parent. */
function faultHost(options: HostOptions, script: ScriptEntry[]) {
  const host = createHost({ agentModule: FAULT_MODULE, abortGraceMs: 200, ...options })
  const model = new ScriptedModel(script)
  host.models.register('scripted', model)
  return { host, parent: host.createAgent({ options: { provider: 'scripted' } }) }
}

const EXIT: ScriptEntry[] = [[{ type: 'text-delta', text: 'about to exit' }, { type: 'tool-call', id: 'c1', name: 'exit', arguments: '{"code":7}' }, { type: 'finish', reason: 'tool-calls' }]]

/** Reads a run whose runner is about to die; checks that the reader got everything, the host's turn/end last. */
async function readsThroughDeath(host: ReturnType<typeof createHost>, run: SubagentRun, read: Promise<SessionEvent[]>, diagnostic: RegExp): Promise<void> {
  const result = await run.result
  expect(result.stopReason).toBe('error')
  expect(result.diagnostic).toMatch(diagnostic)
  const mirrored = host.agents.get(run.id)!.session.events
  const seen = await read
  expect(seen).toEqual(mirrored)
  expect(seen.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: { kind: 'error', message: expect.stringMatching(diagnostic) } } })
  await run.dispose()
}

const DYING: readonly TransportName[] = BULLMQ ? [...POOLED, 'bullmq'] : POOLED

describe.each(DYING)('%s transport: a child whose runner dies', (transport) => {
  it('its readers get everything recorded, the turn/end the host closed it with included, then end', { timeout: 30_000 }, async ({ onTestFinished }) => {
    const { host, parent } = faultHost(await ownRunnerOptions(transport, [FAULT_MODULE], onTestFinished), EXIT)
    try {
      const run = await host.spawn.start({ prompt: 'die', parent, signal: signal() })
      await readsThroughDeath(host, run, collect(run.events()), /exited with code 7/)
    } finally {
      await host.close()
    }
  })
})

describe.skipIf(!BULLMQ)('bullmq transport: a child whose node is killed', () => {
  it('its readers get everything recorded, the turn/end the host closed it with included, then end', { timeout: 30_000 }, async () => {
    const queue = `events-${randomBytes(4).toString('hex')}`
    const node = await startTestNode({ redis: BULLMQ!.redis, queue, modules: [FAULT_MODULE], maxThreads: 1, childrenPerWorker: 1 })
    const { host, parent } = faultHost({ transport: bullmqTransport({ connection: BULLMQ!.redis, queue, nodeSilenceMs: 1000 }) }, ['hang'])
    try {
      const run = await host.spawn.start({ prompt: 'stream then wait', parent, signal: signal() })
      const read = collect(run.events())
      await readUntil(run, (e) => e.type === 'assistant/chunk')
      node.process.kill('SIGKILL')
      await readsThroughDeath(host, run, read, new RegExp(`node ${node.id} stopped answering`))
    } finally {
      await host.close()
      await node.stop()
    }
  })
})
