/**
 * Thread-mates survive (CONTRACT.md §8): when a runner is stopped or dies, every other child on
 * it that waited on the host is rebuilt on another runner and finishes its turn; one inside module
 * code ends `error`, told why. Each mate's model holds its first request ('hang': it streams
 * 'partial', then waits until the request is aborted, which a move does) and answers the second.
 */
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { POOLED } from '../support/harness.js'
import { closeWorkerHosts, workerHost as hostOn } from '../support/worker-host.js'
import {
  defineTool,
  ScriptedModel,
  textResponse,
  toolCallResponse,
  type Host,
  type HostOptions,
  type ScriptEntry,
  type SessionEvent,
  type SubagentEndEvent,
  type SubagentRun,
} from 'subagent-worker'

const FAULT_MODULE = fileURLToPath(new URL('../fixtures/fault-module.mjs', import.meta.url))
afterEach(closeWorkerHosts)

const signal = () => new AbortController().signal

/** Resolves with the first event of child `id` (any child when undefined) that `match` accepts, from now on. */
function nextEvent(host: Host, match: (event: SessionEvent) => boolean, id?: string): Promise<SessionEvent> {
  return new Promise((resolve) => {
    const off = host.on('subagent/event', (info) => {
      if ((id === undefined || info.id === id) && match(info.event)) {
        off()
        resolve(info.event)
      }
    })
  })
}

/** Resolves once `count` distinct children have streamed a chunk: each is waiting on its held host model. */
function streaming(host: Host, count: number): Promise<void> {
  const seen = new Set<string>()
  return new Promise((resolve) => {
    const off = host.on('subagent/event', ({ id, event }) => {
      if (event.type !== 'assistant/chunk') return
      seen.add(id)
      if (seen.size === count) {
        off()
        resolve()
      }
    })
  })
}

function endsOf(host: Host): Map<string, SubagentEndEvent> {
  const ends = new Map<string, SubagentEndEvent>()
  host.on('subagent/end', (event) => void ends.set(event.id, event))
  return ends
}

const contiguous = (events: readonly SessionEvent[]) => events.every((event, i) => event.seq === i)
const moved = (events: readonly SessionEvent[]) => events.filter((event) => event.type === 'child/moved').map((event) => (event.data as { reason: string }).reason)

describe.each(POOLED)('%s transport: thread-mates survive', (isolation) => {
  const stopped = isolation === 'worker' ? 'terminated' : 'killed'
  const workerHost = (script: ScriptEntry[], options: HostOptions = {}) =>
    hostOn(FAULT_MODULE, script, { isolation, ...options, pool: { minThreads: 1, maxThreads: 2, childrenPerWorker: 10, ...options.pool } })

  /** Nine mates, each on a model of its own that holds its first request and answers the second. */
  async function mates(host: Host, parent: ReturnType<Host['createAgent']>): Promise<SubagentRun[]> {
    const waiting = streaming(host, 9)
    const runs: SubagentRun[] = []
    for (let i = 0; i < 9; i++) {
      host.models.register(`mate-${i}`, new ScriptedModel(['hang', textResponse(`answer ${i}`)]))
      runs.push(await host.spawn.start({ prompt: `task ${i}`, parent, signal: signal(), agentOptions: { provider: `mate-${i}` } }))
    }
    await waiting
    return runs
  }

  async function expectMoved(host: Host, runs: SubagentRun[], ends: Map<string, SubagentEndEvent>, reason: RegExp): Promise<void> {
    for (const [i, run] of runs.entries()) {
      const result = await run.result
      expect(result.stopReason).toBe('completed')
      expect(result.output).toEqual([{ type: 'text', text: `answer ${i}` }])
      const events = host.agents.get(run.id)!.session.events
      expect(contiguous(events)).toBe(true)
      const reasons = moved(events)
      expect(reasons).toHaveLength(1)
      expect(reasons[0]).toMatch(reason)
      expect(events.filter((event) => event.type === 'turn/start')).toHaveLength(1)
      expect(events.at(-1)!.type).toBe('turn/end')
      await run.dispose()
      expect(ends.get(run.id)).toMatchObject({ stopReason: 'completed', moves: 1, lastAssistantMessage: `answer ${i}` })
    }
  }

  it('nine mates waiting on their host model survive a sibling stopped past the grace, each with one child/moved', async () => {
    const { host, parent } = workerHost([toolCallResponse('c1', 'spin', {})])
    const ends = endsOf(host)
    let starts = 0
    host.on('subagent/start', () => void starts++)
    const runs = await mates(host, parent)
    const stuck = new AbortController()
    const spinning = nextEvent(host, (event) => event.type === 'assistant/message')
    const spinner = await host.spawn.start({ prompt: 'spin', parent, signal: stuck.signal })
    await spinning
    stuck.abort()
    const stuckResult = await spinner.result
    expect(stuckResult.stopReason).toBe('aborted')
    expect(stuckResult.diagnostic).toContain(stopped)
    await expectMoved(host, runs, ends, new RegExp(`sibling subagent ${spinner.id} did not stop`))
    // No second subagent/start: ten starts for ten children.
    expect(starts).toBe(10)
    expect(ends.get(spinner.id)!.moves).toBeUndefined()
    await spinner.dispose()
  })

  it('nine mates survive a sibling that crashes the runner', async () => {
    const { host, parent } = workerHost([toolCallResponse('c1', 'exit', { code: 7 })])
    const ends = endsOf(host)
    const runs = await mates(host, parent)
    const crasher = await host.spawn.start({ prompt: 'crash', parent, signal: signal() })
    const crashed = await crasher.result
    expect(crashed.stopReason).toBe('error')
    expect(crashed.diagnostic).toMatch(/exited with code 7/)
    await expectMoved(host, runs, ends, /exited with code 7/)
    await crasher.dispose()
  })

  it('nine mates survive a sibling that hits the heap limit', async () => {
    const { host, parent } = workerHost([toolCallResponse('c1', 'hog_memory', {})], {
      pool: { resourceLimits: { maxOldGenerationSizeMb: 24, maxYoungGenerationSizeMb: 8 } },
    })
    const ends = endsOf(host)
    const runs = await mates(host, parent)
    const hog = await host.spawn.start({ prompt: 'hog', parent, signal: signal() })
    expect((await hog.result).diagnostic).toMatch(/out of memory/)
    await expectMoved(host, runs, ends, /out of memory/)
    await hog.dispose()
  })

  it('a mate waiting on a host tool moves; the tool runs once and its result reaches the child where it now runs', async () => {
    const { host, parent } = workerHost([toolCallResponse('c1', 'exit', { code: 7 })])
    let runs = 0
    let release!: (value: string) => void
    const held = new Promise<string>((resolve) => (release = resolve))
    let called!: () => void
    const calledOnce = new Promise<void>((resolve) => (called = resolve))
    host.tools.register(
      defineTool({
        name: 'host_fetch',
        description: 'Answers when the test releases it.',
        parameters: { type: 'object', properties: {} },
        execute: () => {
          runs++
          called()
          return held
        },
      }),
    )
    const mateModel = new ScriptedModel([toolCallResponse('h1', 'host_fetch', {}), textResponse('used the fetched value')])
    host.models.register('mate', mateModel)
    const mate = await host.spawn.start({ prompt: 'fetch', parent, signal: signal(), agentOptions: { provider: 'mate' } })
    await calledOnce
    const movedEvent = nextEvent(host, (event) => event.type === 'child/moved', mate.id)
    const crasher = await host.spawn.start({ prompt: 'crash', parent, signal: signal() })
    expect((await crasher.result).stopReason).toBe('error')
    await movedEvent
    release('fetched value')
    const result = await mate.result
    expect(result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'used the fetched value' }] })
    expect(runs).toBe(1)
    const events = host.agents.get(mate.id)!.session.events
    expect(contiguous(events)).toBe(true)
    const results = events.filter((event) => event.type === 'tool/result')
    expect(results.map((event) => event.data)).toMatchObject([{ callId: 'h1', name: 'host_fetch', isError: false, content: [{ type: 'text', text: 'fetched value' }] }])
    // The second request saw the tool's result: the child went on with its step, not a new turn.
    expect(mateModel.requests).toHaveLength(2)
    await Promise.all([mate.dispose(), crasher.dispose()])
  })

  it('a mate inside a module tool ends error, naming the sibling', async () => {
    const { host, parent } = workerHost([toolCallResponse('c1', 'spin', {})])
    host.models.register('holder', new ScriptedModel([toolCallResponse('m1', 'hold', {})]))
    const holding = nextEvent(host, (event) => event.type === 'assistant/message')
    const holder = await host.spawn.start({ prompt: 'hold', parent, signal: signal(), agentOptions: { provider: 'holder' } })
    await holding
    const stuck = new AbortController()
    const spinning = nextEvent(host, (event) => event.type === 'assistant/message')
    const spinner = await host.spawn.start({ prompt: 'spin', parent, signal: stuck.signal })
    await spinning
    stuck.abort()
    const result = await holder.result
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toContain(`sibling subagent ${spinner.id}`)
    expect(moved(host.agents.get(holder.id)!.session.events)).toEqual([])
    await Promise.all([holder.dispose(), spinner.dispose()])
  })

  it('a child moved three times ends error the fourth time its runner goes, saying so', async () => {
    const { host, parent } = workerHost([], { pool: { minThreads: 1, maxThreads: 1, childrenPerWorker: 2 } })
    const mateModel = new ScriptedModel(['hang', 'hang', 'hang', 'hang'])
    host.models.register('mate', mateModel)
    let waiting = streaming(host, 1)
    const mate = await host.spawn.start({ prompt: 'wait', parent, signal: signal(), agentOptions: { provider: 'mate' } })
    await waiting
    for (let crash = 1; crash <= 4; crash++) {
      host.models.register(`crash-${crash}`, new ScriptedModel([toolCallResponse('c1', 'exit', { code: crash })]))
      // After a move, the mate's next request streams again on its new runner.
      waiting = nextEvent(host, (event) => event.type === 'assistant/chunk', mate.id).then(() => {})
      const crasher = await host.spawn.start({ prompt: 'crash', parent, signal: signal(), agentOptions: { provider: `crash-${crash}` } })
      expect((await crasher.result).diagnostic).toMatch(new RegExp(`exited with code ${crash}`))
      await crasher.dispose()
      if (crash < 4) await waiting
    }
    const result = await mate.result
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toMatch(/exited with code 4.*moved to another runner 3 times/)
    expect(moved(host.agents.get(mate.id)!.session.events)).toHaveLength(3)
    expect(mateModel.requests).toHaveLength(4)
    await mate.dispose()
  })

  it('a fork child keeps its seed out of its output after a move', async () => {
    const { host, parent } = workerHost([textResponse('seed reply')])
    await parent.run('seed conversation')
    host.models.register('forked', new ScriptedModel(['hang', textResponse('forked answer')]))
    const waiting = streaming(host, 1)
    const fork = await host.fork.start({ prompt: 'forked task', parent, signal: signal(), agentOptions: { provider: 'forked' } })
    await waiting
    host.models.register('crash', new ScriptedModel([toolCallResponse('c1', 'exit', { code: 7 })]))
    const crasher = await host.spawn.start({ prompt: 'crash', parent, signal: signal(), agentOptions: { provider: 'crash' } })
    await crasher.result
    const result = await fork.result
    expect(result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'forked answer' }] })
    const mirror = host.agents.get(fork.id)!.session
    const seedLength = mirror.header.seedLength!
    expect(seedLength).toBeGreaterThan(0)
    expect(contiguous(mirror.events)).toBe(true)
    // The parent's turn in the seed, and the child's one turn: the move began none.
    expect(mirror.events.filter((event) => event.type === 'turn/start')).toHaveLength(2)
    expect(moved(mirror.events.slice(seedLength))).toHaveLength(1)
    await Promise.all([fork.dispose(), crasher.dispose()])
  })
})
