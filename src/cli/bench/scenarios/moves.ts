/**
 * S11: thread-mates survive (CONTRACT.md §8). `children` delegations started at once on worker
 * threads, `perThread` to a thread, each `steps` steps of a host model that takes `latencyMs` a
 * step (a host tool call between them), while one runner thread is killed at most every
 * `killEveryMs` (the Killer says when): the bench module's runner channel (module.ts) tells the
 * oldest live thread to exit, a crash wherever its children are. Each round reports the fraction of children that complete (the goal:
 * all of them, since each is always waiting on the host or between steps) and, per moved child,
 * its time to its result over the median of the 21 unmoved children of the same round that began
 * nearest it, both from a child's first model request (after its wait for a first slot): the
 * latency a move adds, its wait for a slot on another runner included.
 *
 * Worker threads only: the runner channel reaches the threads of this process; a runner process
 * is killed the same way in test/contract/randomized.test.ts. Inline has no runner to kill.
 */
import { BroadcastChannel } from 'node:worker_threads'
import { setTimeout as delay } from 'node:timers/promises'
import { defineTool, textOf, textResponse, toolCallResponse, type Model, type ModelRequest, type StreamChunk, type SubagentEndEvent } from '../../../index.js'
import { benchHost, defaultThreads, withProvider, type BenchHost } from '../harness.js'
import { RUNNERS_CHANNEL, type RunnerSignal } from '../module.js'
import { figure, summarize } from '../measure/stats.js'
import type { Figure } from '../types.js'
import { allMet, ratioGoal, type Scenario } from './scenario.js'

const PROVIDER = 'bench-moves'
const HOST_TOOL = 'bench_step'

/**
 * A host model: each request answers after `latencyMs` (a move aborts it), calling the host tool
 * until the last step. `heard` hears each request, with the child's prompt (the round's to set).
 */
class Stepper implements Model {
  heard: (prompt: string) => void = () => {}

  constructor(
    readonly steps: number,
    readonly latencyMs: number,
  ) {}

  async *stream(request: ModelRequest): AsyncGenerator<StreamChunk> {
    this.heard(textOf(request.messages[0]!.content))
    await delay(this.latencyMs, undefined, { signal: request.signal })
    const done = request.messages.filter((message) => message.role === 'tool').length
    yield* done < this.steps - 1 ? toolCallResponse(`s${done}`, HOST_TOOL, {}) : textResponse('done')
  }
}

/** The runner threads that said they are up (oldest first), and a way to end one. */
function runnerThreads() {
  const live = new Set<number>()
  const channel = new BroadcastChannel(RUNNERS_CHANNEL)
  channel.onmessage = (message) => {
    const data = (message as { data: RunnerSignal }).data
    if ('up' in data) live.add(data.up)
  }
  return {
    /** Threads up and not told to exit. */
    get up(): number {
      return live.size
    },
    /** Tells the oldest live thread to exit. */
    killOne(): void {
      const [oldest] = live
      if (oldest === undefined) return
      live.delete(oldest)
      channel.postMessage({ exit: oldest } satisfies RunnerSignal)
    },
    close: () => channel.close(),
  }
}

type RunnerThreads = ReturnType<typeof runnerThreads>

/**
 * When a round kills a thread, judged at each model request: once every slot has held a child
 * that asked its model, then at most every `everyMs`; only while the pool is whole (the thread
 * killed last was replaced and is up) and more children are left than there are slots, so the
 * oldest thread holds a full load. A kill faster than a loaded machine starts threads kills each
 * replacement as it comes up, until its children pass the move bound and end `error`: that
 * measures the bound, not a move. And a thread with one child left that exits of itself is taken
 * to have been crashed by that child (CONTRACT.md §8), which ends it `error`: the bench's exit is
 * not that child's doing.
 */
class Killer {
  kills = 0
  #last = -Infinity

  constructor(
    readonly threads: RunnerThreads,
    readonly shape: { threads: number; slots: number; everyMs: number },
  ) {}

  consider(asked: number, unfinished: number): void {
    const { threads, slots, everyMs } = this.shape
    if (asked < slots || unfinished <= slots || this.threads.up < threads) return
    const now = performance.now()
    if (now - this.#last < everyMs) return
    this.#last = now
    this.kills++
    this.threads.killOne()
  }
}

interface Round {
  completed: number
  moved: number
  kills: number
  /** Per moved child: its time over the median of the unmoved children that began nearest it, in ms. */
  addedMs: number[]
  unmovedMedianMs: number
  /** Why each child that did not complete ended, and after how many moves. */
  errors: string[]
}

interface RoundShape {
  children: number
  /** The kills' shape; none in a warm-up round. */
  kills?: Killer['shape']
}

async function round(bench: BenchHost, shape: RoundShape, threads: RunnerThreads, model: Stepper): Promise<Round> {
  const { host } = bench
  const { children } = shape
  const firstAsked = new Map<string, number>()
  const ends = new Map<string, SubagentEndEvent>()
  const killer = shape.kills && new Killer(threads, shape.kills)
  const finished = new Map<string, number>()
  const started = new Map<string, number>()
  const errors: string[] = []
  model.heard = (prompt) => {
    if (!firstAsked.has(prompt)) firstAsked.set(prompt, performance.now())
    killer?.consider(firstAsked.size, children - ends.size)
  }
  const offEnd = host.on('subagent/end', (end) => void ends.set(end.id, end))
  try {
    const runs = await Promise.all(Array.from({ length: children }, (_, i) => host.spawn.start({ prompt: `task ${i}`, parent: bench.parent })))
    await Promise.all(
      runs.map(async (run, i) => {
        const result = await run.result
        finished.set(run.id, performance.now())
        started.set(run.id, firstAsked.get(`task ${i}`)!)
        if (result.stopReason !== 'completed') errors.push(`${result.stopReason} after ${ends.get(run.id)?.moves ?? 0} moves: ${result.diagnostic ?? ''}`)
        await run.dispose()
      }),
    )
  } finally {
    offEnd()
  }
  const completed = [...ends.values()].filter((end) => end.stopReason === 'completed')
  const moved = completed.filter((end) => (end.moves ?? 0) > 0)
  const unmoved = completed.filter((end) => !end.moves)
  const kills = killer?.kills ?? 0
  if (!killer) return { completed: completed.length, moved: 0, kills, addedMs: [], unmovedMedianMs: 0, errors }
  // A round that moved no child, or moved all, measured nothing: say so rather than report it.
  if (moved.length === 0 || unmoved.length === 0) {
    throw new Error(`S11: ${moved.length} of ${completed.length} completed children moved after ${kills} kills: a round needs both moved and unmoved children (${errors.length} did not complete: ${errors.slice(0, 3).join('; ')})`)
  }
  // Against the unmoved children that began about when it did: the host's load changes over a
  // round (all starts are published at its beginning), and a child's time with it.
  const timeOf = (id: string) => finished.get(id)! - started.get(id)!
  const peers = unmoved.map((end) => ({ at: started.get(end.id)!, ms: timeOf(end.id) })).sort((a, b) => a.at - b.at)
  const addedMs = moved.map((end) => timeOf(end.id) - peerMedian(peers, started.get(end.id)!))
  return { completed: completed.length, moved: moved.length, kills, addedMs, unmovedMedianMs: summarize(peers.map((peer) => peer.ms)).median, errors }
}

/** How many unmoved children a moved one is measured against: those whose first request was nearest its own. */
const PEERS = 21

function peerMedian(peers: ReadonlyArray<{ at: number; ms: number }>, at: number): number {
  let index = peers.findIndex((peer) => peer.at >= at)
  if (index < 0) index = peers.length
  const from = Math.max(0, Math.min(index - Math.floor(PEERS / 2), peers.length - PEERS))
  return summarize(peers.slice(from, from + PEERS).map((peer) => peer.ms)).median
}

export const s11: Scenario = {
  ids: ['S11'],
  label: 'S11 thread-mates survive a runner killed every second',
  units: (plan) => plan.moves.rounds + 1,
  async run(context) {
    const { children, perThread, steps, latencyMs, killEveryMs, rounds } = context.plan.moves
    const threads = defaultThreads()
    const pool = { minThreads: threads, maxThreads: threads, childrenPerWorker: perThread }
    // Listening before the host starts its threads: each says it is up as it loads the module.
    const runners = runnerThreads()
    const bench = benchHost('worker', { pool })
    const moving = withProvider(bench, PROVIDER)
    const model = new Stepper(steps, latencyMs)
    bench.host.models.register(PROVIDER, model)
    bench.host.tools.register(defineTool({ name: HOST_TOOL, description: 'Answers at once.', parameters: { type: 'object', properties: {} }, execute: () => 'ok' }))
    const results: Round[] = []
    try {
      // Warm-up, no kills: every thread has loaded the module and run both paths.
      await round(moving, { children: threads * perThread }, runners, model)
      context.progress.advance(1)
      for (let r = 0; r < rounds; r++) {
        results.push(await round(moving, { children, kills: { threads, slots: threads * perThread, everyMs: killEveryMs } }, runners, model))
        context.progress.advance(1)
      }
    } finally {
      runners.close()
      await bench.host.close()
    }
    const total = children * rounds
    const completed = results.reduce((sum, r) => sum + r.completed, 0)
    const fraction = completed / total
    const added: Figure = figure(results.flatMap((r) => r.addedMs), 'lower')
    const goals = [ratioGoal('worker', 'every child completes (each waits on the host or is between steps)', '>=', fraction, 1)]
    return [
      {
        id: 'S11',
        title: `thread-mates survive: ${children.toLocaleString('en-US')} children, ${perThread} a thread, one thread killed at most every ${killEveryMs} ms`,
        metric: "ms a move adds: a moved child's time from its first model request to its result over the median of the 21 unmoved children that began nearest it, same round",
        unit: 'ms',
        better: 'lower',
        model: `a host model answering after ${latencyMs} ms a step, ${steps} steps (a host tool call between them)`,
        setup: { children, rounds, steps, latencyMs, killEveryMs, pool },
        inline: null,
        worker: added,
        process: null,
        notApplicable: {
          inline: 'an inline child has no runner to kill',
          process: "measured on threads: the bench's runner channel reaches this process's threads (a runner process is killed by SIGKILL in test/contract/randomized.test.ts)",
        },
        ratio: null,
        processRatio: { inline: null, worker: null },
        goals,
        met: allMet(goals),
        extra: {
          completedFraction: fraction,
          completed,
          children: total,
          moved: results.reduce((sum, r) => sum + r.moved, 0),
          kills: results.reduce((sum, r) => sum + r.kills, 0),
          unmovedMedianMs: results.map((r) => r.unmovedMedianMs),
          // Why each child that did not complete ended (the first 20).
          errors: results.flatMap((r) => r.errors).slice(0, 20),
        },
      },
    ]
  },
}
