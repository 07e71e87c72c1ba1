/**
 * A seeded, bounded randomized lifecycle run on every transport: children started with hanging,
 * delayed, quick and tool-calling scripts, aborted before and after publication, their results
 * awaited or not, disposed twice, and the host closed at a random point. Whatever happens:
 * every promise settles, every `subagent/start` has its `subagent/end`, each child's events are
 * contiguous, the store holds exactly what the host showed, nothing is left in `host.agents`,
 * and after close() no worker thread or child process of the host's is left.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import {
  createHost,
  createMemoryStore,
  defineTool,
  ScriptedModel,
  textOf,
  textResponse,
  toolCallResponse,
  type Host,
  type Model,
  type ModelRequest,
  type SessionEvent,
  type StreamChunk,
  type SubagentEndEvent,
  type SubagentRun,
} from 'subagent-worker'
import { closeHosts, POOLED, setup, TRANSPORTS } from '../support/harness.js'
import { eventOf, recordLifecycle } from '../support/driver-helpers.js'
import { contiguous, endsOf, moved } from '../support/moves.js'

const killHosts: Host[] = []
afterEach(async () => {
  await closeHosts()
  await Promise.all(killHosts.splice(0).map((host) => host.close()))
})

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

/**
 * Runner kills (CONTRACT.md §8, thread-mates survive): each round starts children on a pool of
 * two runners, four children a runner, and kills the runner of a waiting child at a seeded point
 * in the order the children reach their wait: a process by SIGKILL, a thread by the fixture's
 * exit channel (the thread exits, wherever its children are). A child waits on its host model,
 * on a host tool, or inside a module tool; each first runs the module tool `tally`, which writes
 * a line a run to a file. Whatever the point: every child that was
 * waiting on the host when its runner died completes with exactly its answer and one
 * `child/moved`, no module tool ran twice, and a child that ends error was on the killed runner
 * and not waiting on the host.
 */
const FAULT_MODULE = fileURLToPath(new URL('../fixtures/fault-module.mjs', import.meta.url))
const KILL_ROUNDS = 3
type Kind = 'model' | 'tool' | 'module'

/** Where a child ran `tally`, from the result the host recorded; undefined before it did. */
function placeOf(events: readonly SessionEvent[]): { pid: number; threadId: number } | undefined {
  const result = events.find((event) => event.type === 'tool/result' && (event.data as { name: string }).name === 'tally')
  return result && JSON.parse(textOf((result.data as { content: Parameters<typeof textOf>[0] }).content))
}

const usageOf = (text: string) => Math.ceil(text.length / 4)

/**
 * A child's host model. Its first request calls `tally`; then by kind: 'model' streams 'answer '
 * and holds its request until released or aborted (a move), answering whole when asked again;
 * 'tool' calls the host tool `host_wait`, then answers; 'module' calls the module tool `hold`.
 */
class Mate implements Model {
  holds = 0
  constructor(
    readonly i: number,
    readonly kind: Kind,
    readonly tally: { file: string; tag: string },
    readonly waiting: (i: number) => void,
    readonly released: Promise<void>,
  ) {}

  async *stream(request: ModelRequest): AsyncGenerator<StreamChunk> {
    const stage = request.messages.filter((message) => message.role === 'tool').length
    if (stage === 0) return yield* toolCallResponse('t', 'tally', this.tally)
    if (this.kind === 'module') return yield* toolCallResponse('m', 'hold', {})
    if (this.kind === 'tool') return yield* stage === 1 ? toolCallResponse('h', 'host_wait', { i: this.i }) : textResponse(`answer ${this.i}`)
    if (this.holds++ > 0) return yield* textResponse(`answer ${this.i}`)
    yield { type: 'text-delta', text: 'answer ' }
    this.waiting(this.i)
    const { signal } = request
    await new Promise<void>((resolve, reject) => {
      void this.released.then(resolve)
      signal.addEventListener('abort', () => reject(signal.reason), { once: true })
    })
    yield* textResponse(String(this.i))
  }
}

describe.each(POOLED)('randomized runner kills [%s]', (isolation) => {
  it(`${KILL_ROUNDS} rounds, a runner killed at a random point: no child waiting on the host lost, no module tool run twice`, async ({ onTestFailed }) => {
    const seed = SEED + 20 + isolation.length
    onTestFailed(() => console.error(`randomized runner kills [${isolation}] failed with seed ${seed}`))
    const next = random(seed)
    for (let round = 0; round < KILL_ROUNDS; round++) await killRound(isolation, round, next)
  }, 120_000)
})

async function killRound(isolation: (typeof POOLED)[number], round: number, next: () => number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'runner-kills-'))
  try {
    const file = join(dir, 'tally')
    writeFileSync(file, '')
    const host = createHost({
      isolation,
      agentModule: FAULT_MODULE,
      store: createMemoryStore(),
      abortGraceMs: 200,
      pool: { minThreads: 2, maxThreads: 2, childrenPerWorker: 4 },
      ...(isolation === 'process' ? { sandbox: { fsWrite: [dir] } } : {}),
    })
    killHosts.push(host)
    const ends: Map<string, SubagentEndEvent> = endsOf(host)
    const parent = host.createAgent({ options: { provider: 'none' } })
    let release!: () => void
    const released = new Promise<void>((resolve) => (release = resolve))
    const toolRuns = new Map<number, number>()
    host.tools.register(
      defineTool<{ i: number }>({
        name: 'host_wait',
        description: 'Answers once the test releases it, counting its runs.',
        parameters: { type: 'object', properties: { i: { type: 'integer' } }, required: ['i'] },
        execute: async ({ i }) => {
          toolRuns.set(i, (toolRuns.get(i) ?? 0) + 1)
          waiting(i)
          await released
          return `fetched ${i}`
        },
      }),
    )

    // At most seven children: all are placed at once (two runners of four). At least one waits on the host.
    const count = 4 + Math.floor(next() * 4)
    const kinds = Array.from({ length: count }, (_, i): Kind => (i === 0 ? 'model' : (['model', 'tool', 'module'] as const)[Math.floor(next() * 3)]!))
    const waiters = kinds.filter((kind) => kind !== 'module').length
    const killAfter = 1 + Math.floor(next() * waiters)
    const victimPick = next()
    const waitingNow = new Set<number>()
    let reached!: () => void
    const killPoint = new Promise<void>((resolve) => (reached = resolve))
    function waiting(i: number): void {
      waitingNow.add(i)
      if (waitingNow.size === killAfter) reached()
    }

    const tallies = kinds.map((_, i) => ({ file, tag: `child ${i}` }))
    const controllers = kinds.map(() => new AbortController())
    const runs: SubagentRun[] = []
    const mates = kinds.map((kind, i) => new Mate(i, kind, tallies[i]!, waiting, released))
    for (const [i, mate] of mates.entries()) {
      host.models.register(`mate-${i}`, mate)
      runs.push(await host.spawn.start({ prompt: `task ${i}`, parent, signal: controllers[i]!.signal, agentOptions: { provider: `mate-${i}` } }))
    }
    await killPoint
    const waitingAtKill = [...waitingNow].sort((a, b) => a - b)
    const events = (run: SubagentRun) => host.agents.get(run.id)!.session.events

    // Kill the runner of one waiting child: SIGKILL its process, or end its thread (the fixture's exit channel).
    const victim = placeOf(events(runs[waitingAtKill[Math.floor(victimPick * waitingAtKill.length)]!]!))!
    let fault: RegExp
    if (isolation === 'process') {
      process.kill(victim.pid, 'SIGKILL')
      fault = /SIGKILL/
    } else {
      const code = 70 + round
      const exits = new BroadcastChannel('fault-module:exit')
      exits.postMessage({ threadId: victim.threadId, code })
      exits.close()
      fault = new RegExp(`exited with code ${code}`)
    }
    const killed = (place: { pid: number; threadId: number } | undefined) => place !== undefined && place.pid === victim.pid && place.threadId === victim.threadId
    // Every child that waited on the host on the killed runner moves; then the waits are released.
    const victims = waitingAtKill.filter((i) => killed(placeOf(events(runs[i]!))))
    await Promise.all(victims.map((i) => eventOf(runs[i]!, 'child/moved')))
    release()

    const tallyShown: string[] = []
    for (const [i, kind] of kinds.entries()) {
      const run = runs[i]!
      if (kind === 'module') {
        controllers[i]!.abort()
        const result = await run.result
        expect(['aborted', 'error']).toContain(result.stopReason)
        // Inside module code when its runner died: given up, told why, never moved.
        if (result.stopReason === 'error') {
          expect(result.diagnostic).toMatch(fault)
          // It ran on the killed runner, or died inside `tally` before its result was heard.
          const place = placeOf(events(run))
          expect(place === undefined || killed(place)).toBe(true)
        }
      } else {
        const result = await run.result
        const shown = events(run)
        const moves = moved(shown)
        if (result.stopReason === 'error') {
          // Not waiting on the host: inside `tally` on the killed runner.
          expect(waitingAtKill).not.toContain(i)
          expect(result.diagnostic).toMatch(fault)
          expect(moves).toEqual([])
        } else {
          // A held request that a move aborted streamed no usage; the one made again answers whole.
          const answer = kind === 'model' ? (mates[i]!.holds > 1 ? 2 : 1) : usageOf(JSON.stringify({ i })) + usageOf(`answer ${i}`)
          const usage = { inputTokens: 0, outputTokens: usageOf(JSON.stringify(tallies[i])) + answer }
          expect(result, `child ${i} (${kind})`).toEqual({ stopReason: 'completed', output: [{ type: 'text', text: `answer ${i}` }], usage, totalUsage: usage })
          expect(moves.length).toBeLessThanOrEqual(1)
          if (victims.includes(i)) expect(moves, `child ${i} was waiting on the killed runner`).toEqual([expect.stringMatching(fault)])
          if (kind === 'tool') expect(toolRuns.get(i)).toBe(1)
        }
        expect(contiguous(shown)).toBe(true)
        expect(shown.filter((event) => event.type === 'turn/start')).toHaveLength(1)
      }
      const moves = moved(events(run)).length
      const tallied = placeOf(events(run)) !== undefined
      await run.dispose()
      expect(ends.get(run.id)!.moves).toBe(moves || undefined)
      tallyShown.push(...(tallied ? [tallies[i]!.tag] : []))
    }
    // No module tool ran twice: a line for each child whose tally the host recorded, none twice (a
    // child inside it when its runner died may have written one the host never heard of).
    const lines = readFileSync(file, 'utf8').split('\n').filter(Boolean)
    expect(new Set(lines).size, `tally runs: ${lines.join(', ')}`).toBe(lines.length)
    expect(lines).toEqual(expect.arrayContaining(tallyShown))
    await host.close()
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
