/**
 * S11: thread-mates survive (CONTRACT.md §8). `children` delegations started at once on worker
 * threads, `perThread` to a thread, each `steps` steps of a host model that takes `latencyMs` a
 * step (a host tool call between them), while one runner thread is killed every `killEveryMs`:
 * the bench module's runner channel (module.ts) tells the oldest live thread to exit, a crash
 * wherever its children are. Each round reports the fraction of children that complete (the goal:
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
import { figure, summarize } from '../stats.js'
import type { Figure } from '../types.js'
import { allMet, ratioGoal, type Scenario } from './scenario.js'

const PROVIDER = 'bench-moves'
const HOST_TOOL = 'bench_step'

/**
 * A host model: each request answers after `latencyMs` (a move aborts it), calling the host tool
 * until the last step. It notes when each child (by its prompt) first asked: when it began to
 * run, after any wait for its first slot.
 */
function stepper(steps: number, latencyMs: number, firstAsked: Map<string, number>): Model {
  return {
    async *stream(request: ModelRequest): AsyncGenerator<StreamChunk> {
      const prompt = textOf(request.messages[0]!.content)
      if (!firstAsked.has(prompt)) firstAsked.set(prompt, performance.now())
      await delay(latencyMs, undefined, { signal: request.signal })
      const done = request.messages.filter((message) => message.role === 'tool').length
      yield* done < steps - 1 ? toolCallResponse(`s${done}`, HOST_TOOL, {}) : textResponse('done')
    },
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
    /** Tells the oldest live thread to exit; false when none is up. */
    killOne(): boolean {
      const [oldest] = live
      if (oldest === undefined) return false
      live.delete(oldest)
      channel.postMessage({ exit: oldest } satisfies RunnerSignal)
      return true
    },
    close: () => channel.close(),
  }
}

interface Round {
  completed: number
  moved: number
  kills: number
  /** Per moved child: its time over the median of the unmoved children that began nearest it, in ms. */
  addedMs: number[]
  unmovedMedianMs: number
  errors: string[]
}

async function round(bench: BenchHost, children: number, killEveryMs: number | undefined, threads: ReturnType<typeof runnerThreads>, firstAsked: Map<string, number>): Promise<Round> {
  const { host } = bench
  firstAsked.clear()
  const started = new Map<string, number>()
  const ends = new Map<string, SubagentEndEvent>()
  const offEnd = host.on('subagent/end', (end) => void ends.set(end.id, end))
  let kills = 0
  const killer = killEveryMs === undefined ? undefined : setInterval(() => void (threads.killOne() && kills++), killEveryMs)
  const finished = new Map<string, number>()
  const errors: string[] = []
  try {
    const prompts = new Map<string, string>()
    const runs = await Promise.all(
      Array.from({ length: children }, async (_, i) => {
        const run = await host.spawn.start({ prompt: `task ${i}`, parent: bench.parent })
        prompts.set(run.id, `task ${i}`)
        return run
      }),
    )
    await Promise.all(
      runs.map(async (run) => {
        const result = await run.result
        finished.set(run.id, performance.now())
        started.set(run.id, firstAsked.get(prompts.get(run.id)!)!)
        if (result.stopReason !== 'completed') errors.push(`${result.stopReason}: ${result.diagnostic ?? ''}`)
        await run.dispose()
      }),
    )
  } finally {
    clearInterval(killer)
    offEnd()
  }
  const timeOf = (id: string) => finished.get(id)! - started.get(id)!
  const completed = [...ends.values()].filter((end) => end.stopReason === 'completed')
  const moved = completed.filter((end) => (end.moves ?? 0) > 0)
  const unmoved = completed.filter((end) => !end.moves)
  if (killEveryMs === undefined) return { completed: completed.length, moved: 0, kills, addedMs: [], unmovedMedianMs: 0, errors }
  // A round that moved no child, or moved all, measured nothing: say so rather than report it.
  if (moved.length === 0 || unmoved.length === 0) throw new Error(`S11: ${moved.length} of ${completed.length} completed children moved after ${kills} kills: a round needs both moved and unmoved children`)
  // Against the unmoved children that began about when it did: the host's load changes over a
  // round (all starts are published at its beginning), and a child's time with it.
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
    const firstAsked = new Map<string, number>()
    bench.host.models.register(PROVIDER, stepper(steps, latencyMs, firstAsked))
    bench.host.tools.register(defineTool({ name: HOST_TOOL, description: 'Answers at once.', parameters: { type: 'object', properties: {} }, execute: () => 'ok' }))
    const results: Round[] = []
    try {
      // Warm-up, no kills: every thread has loaded the module and run both paths.
      await round(moving, threads * perThread, undefined, runners, firstAsked)
      context.progress.advance(1)
      for (let r = 0; r < rounds; r++) {
        results.push(await round(moving, children, killEveryMs, runners, firstAsked))
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
        title: `thread-mates survive: ${children.toLocaleString('en-US')} children, ${perThread} a thread, one thread killed every ${killEveryMs} ms`,
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
          errors: results.flatMap((r) => r.errors).slice(0, 5),
        },
      },
    ]
  },
}
