/**
 * A seeded, bounded randomized lifecycle run on every transport: children started with hanging,
 * delayed, quick and tool-calling scripts, aborted before and after publication, their results
 * awaited or not, disposed twice, and the host closed at a random point. Whatever happens:
 * every promise settles, every `subagent/start` has its `subagent/end`, each child's events are
 * contiguous, the store holds exactly what the host showed, nothing is left in `host.agents`,
 * and after close() no worker thread or child process of the host's is left.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { afterEach, describe, expect, it } from 'vitest'
import { createMemoryStore, defineTool, ScriptedModel, textResponse, toolCallResponse, type SessionEvent, type SubagentRun } from 'subagent-worker'
import { closeHosts, setup, TRANSPORTS } from '../support/harness.js'
import { recordLifecycle } from '../support/driver-helpers.js'

afterEach(closeHosts)

const SEED = 20261201
const ROUNDS = 4
const CHILDREN = 10
/** Far beyond any honest settle time here, even on a loaded machine: a promise still pending then is hung. */
const HUNG_MS = 30_000

/** mulberry32: small, seedable, good enough to pick actions. */
function random(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const many = <T>(entry: T) => Array.from({ length: 200 }, () => entry)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

function settles<T>(promise: Promise<T>, what: string): Promise<PromiseSettledResult<T>> {
  let timer: NodeJS.Timeout | undefined
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} never settled`)), HUNG_MS)
  })
  const outcome = promise.then(
    (value): PromiseSettledResult<T> => ({ status: 'fulfilled', value }),
    (reason: unknown): PromiseSettledResult<T> => ({ status: 'rejected', reason }),
  )
  return Promise.race([outcome, hung]).finally(() => clearTimeout(timer))
}

/**
 * What this process runs beside its own event loop: OS threads (a worker thread is one) and
 * child processes. Read from /proc, so Linux only; elsewhere the leak check is skipped.
 */
function footprint(): { threads: number; children: number } | undefined {
  if (!existsSync('/proc/self/status')) return undefined
  const threads = Number(/^Threads:\s+(\d+)/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1])
  let children = 0
  for (const task of readdirSync('/proc/self/task')) {
    try {
      children += readFileSync(`/proc/self/task/${task}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).length
    } catch {
      // the thread ended while we looked
    }
  }
  return { threads, children }
}

/** Waits for the runners of closed hosts to be gone (a thread or process ends a little after close resolves); generous, as a loaded machine is slow. */
async function settledFootprint(before: { threads: number; children: number }): Promise<{ threads: number; children: number }> {
  let now = footprint()!
  for (let waited = 0; waited < 30_000 && (now.threads > before.threads || now.children > before.children); waited += 50) {
    await sleep(50)
    now = footprint()!
  }
  return now
}

describe.each(TRANSPORTS)('randomized lifecycles [%s]', (transport) => {
  it(`${ROUNDS} rounds of ${CHILDREN} children: nothing lost, nothing hung, nothing left`, async () => {
    const next = random(SEED + transport.length)
    const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!
    const before = footprint()

    for (let round = 0; round < ROUNDS; round++) {
      const store = createMemoryStore()
      const fx = setup(transport, [], { store, abortGraceMs: 200, pool: { minThreads: 1, maxThreads: 2, childrenPerWorker: 4 } })
      const { host, parent } = fx
      host.models.register('quick', new ScriptedModel(many(textResponse('quick answer'))))
      host.models.register('hang', new ScriptedModel(many('hang' as const)))
      host.models.register('delayed', new ScriptedModel(many({ delayMs: 30, chunks: textResponse('late answer') })))
      host.models.register('tool', new ScriptedModel(Array.from({ length: 100 }, () => [toolCallResponse('t', 'wait', { ms: 20 }), textResponse('after the tool')]).flat()))
      host.tools.register(defineTool({ name: 'wait', description: 'Waits.', parameters: { type: 'object', properties: { ms: { type: 'integer' } } }, execute: async ({ ms }) => (await sleep(Number(ms)), 'waited') }))
      const lifecycle = recordLifecycle(host)
      // Half the rounds close the host while children are starting, running or settling.
      const closeAt = next() < 0.5 ? next() * 1000 : undefined
      const mirrors = new Map<string, readonly SessionEvent[]>()
      const pending: Array<Promise<PromiseSettledResult<unknown>>> = []
      let closing: Promise<void> | undefined
      const closer = closeAt === undefined ? undefined : setTimeout(() => (closing = host.close()), closeAt)

      for (let i = 0; i < CHILDREN; i++) {
        await sleep(next() * 30)
        const controller = new AbortController()
        const provider = pick(['quick', 'hang', 'delayed', 'tool'] as const)
        const action = pick(['await', 'abort-before', 'abort-after', 'dispose-early', 'run'] as const)
        const request = { prompt: `child ${i}`, parent, signal: controller.signal, agentOptions: { provider } }
        if (action === 'run') {
          // A hanging child ends only when cancelled: its caller gives up after a while.
          if (provider === 'hang') setTimeout(() => controller.abort(), next() * 40)
          pending.push(settles(host.spawn.run(request), `run of child ${i}`))
          continue
        }
        const started = host.spawn.start(request)
        if (action === 'abort-before') controller.abort()
        const life = (async () => {
          const run: SubagentRun = await started
          const record = () => mirrors.set(run.id, host.agents.get(run.id)?.session.events ?? mirrors.get(run.id) ?? [])
          if (action === 'abort-after' || (provider === 'hang' && action !== 'dispose-early')) {
            await sleep(next() * 40)
            controller.abort()
          }
          if (action === 'dispose-early') await sleep(next() * 20)
          else await run.result
          record()
          await Promise.allSettled([run.dispose(), run.dispose()])
          await run.result
        })()
        pending.push(settles(life, `child ${i} (${provider}, ${action})`))
      }
      const outcomes = await Promise.all(pending)
      clearTimeout(closer)
      await settles((closing ??= host.close()), 'host.close()')

      for (const outcome of outcomes) {
        if (outcome.status === 'rejected' && /never settled/.test(String(outcome.reason))) throw outcome.reason
      }
      // Every start has its end, once.
      expect(lifecycle.ends.map((end) => end.runId).sort()).toEqual(lifecycle.starts.map((start) => start.runId).sort())
      // Each child's events are contiguous, and the store holds exactly what the host showed.
      for (const start of lifecycle.starts) {
        const stored = await store.read(start.id)
        expect(stored, `child ${start.id} is in the store`).toBeDefined()
        expect(stored!.events.every((event, seq) => event.seq === seq)).toBe(true)
        const shown = mirrors.get(start.id)
        if (shown) expect(stored!.events.slice(0, shown.length)).toEqual(shown)
      }
      expect(host.agents.list().map((agent) => agent.id)).toEqual([parent.id])
    }

    // Nothing of the hosts' is left running: no worker thread, no child process.
    if (before) {
      const after = await settledFootprint(before)
      expect(after.threads, 'OS threads after close').toBeLessThanOrEqual(before.threads)
      expect(after.children, 'child processes after close').toBeLessThanOrEqual(before.children)
    }
  }, 180_000)
})
