/**
 * S9: streaming fan-in. A batch of children start at once and each streams 100 text chunks at
 * 50 chunks/s, so the ideal batch takes 2 s on either transport; what is measured is how far
 * behind that the host falls, what each chunk costs in CPU (the whole process, every thread),
 * and how late the host's event loop runs meanwhile. Two model placements, each inline and on
 * workers in the same run: a ScriptedModel on the host (on workers, each chunk is an RPC reply
 * to the thread and an event back) and a module model in the child's own thread (only the events
 * cross). One host per transport serves both placements through two parents.
 */
import { benchHost, delegate, HOST_MODEL, useScript, withProvider, type BenchHost } from '../harness.js'
import { delayMs, loopMonitor, loopTurns, RESOLUTION_MS } from '../loop-delay.js'
import { STREAM_CHUNKS, STREAM_IDEAL_MS, STREAM_INTERVAL_MS, STREAM_MODEL, streamEntry } from '../stream-script.js'
import type { Mode, ScenarioResult } from '../types.js'
import { allMet, cpuSince, ratioGoal, ratioOf, valueGoal, type Scenario } from './scenario.js'
import { figure } from '../stats.js'

type Placement = 'host' | 'module'

/** One transport's host and its two parents, one per model placement. */
interface Transport {
  mode: Mode
  benches: Record<Placement, BenchHost>
}

interface Samples {
  wallMs: number[]
  cpuUsPerChunk: number[]
  loopP99Ms: number[]
  loopMaxMs: number[]
}

/** The goals, judged on the worker medians; the CPU goal is the same for both placements. */
const GOALS: Record<Placement, { wallOverIdeal: number; loopP99Ms: number }> = {
  host: { wallOverIdeal: 1.6, loopP99Ms: 50 },
  module: { wallOverIdeal: 1.3, loopP99Ms: 20 },
}
const CPU_OVER_INLINE = 1.5

const PLACEMENTS: readonly Placement[] = ['host', 'module']

/** Registers the host placement's ScriptedModel (one entry per child); the module model needs none. Returns its unregister. */
function scriptFor(bench: BenchHost, placement: Placement, children: number): () => void {
  return placement === 'host' ? useScript(bench, children, [streamEntry()]).done : () => {}
}

/** Starts `children` at once and waits until each one completed and was disposed. */
async function fanIn(bench: BenchHost, children: number): Promise<void> {
  await Promise.all(Array.from({ length: children }, () => delegate(bench)))
}

/** Untimed: both placements at once, so every thread has imported the module and run both paths. */
async function warmUp(transport: Transport, children: number): Promise<void> {
  const onHost = Math.ceil(children / 2)
  const done = scriptFor(transport.benches.host, 'host', onHost)
  await Promise.all([fanIn(transport.benches.host, onHost), fanIn(transport.benches.module, children - onHost)])
  done()
}

async function measure(bench: BenchHost, placement: Placement, children: number, into: Samples): Promise<void> {
  const done = scriptFor(bench, placement, children)
  const monitor = loopMonitor()
  monitor.enable()
  // Ticks before and after the batch (see loop-delay.ts).
  await loopTurns()
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  await fanIn(bench, children)
  const wall = performance.now() - t0
  const cpuUs = cpuSince(cpu0)
  await loopTurns()
  monitor.disable()
  done()
  into.wallMs.push(wall)
  into.cpuUsPerChunk.push(cpuUs / (children * STREAM_CHUNKS))
  into.loopP99Ms.push(delayMs(monitor.percentile(99)))
  into.loopMaxMs.push(delayMs(monitor.max))
}

const noSamples = (): Samples => ({ wallMs: [], cpuUsPerChunk: [], loopP99Ms: [], loopMaxMs: [] })

function row(placement: Placement, samples: Record<Mode, Samples>, children: number, setup: Record<string, unknown>): ScenarioResult {
  const per = (key: keyof Samples) => ({ inline: figure(samples.inline[key], 'lower'), worker: figure(samples.worker[key], 'lower') })
  const wall = per('wallMs')
  const cpu = per('cpuUsPerChunk')
  const p99 = per('loopP99Ms')
  const goal = GOALS[placement]
  const goals = [
    ratioGoal(`wall <= ${goal.wallOverIdeal} × ideal`, '<=', wall.worker.median / STREAM_IDEAL_MS, goal.wallOverIdeal, STREAM_IDEAL_MS),
    valueGoal(`event-loop p99 <= ${goal.loopP99Ms} ms`, '<=', p99.worker.median, goal.loopP99Ms),
    ratioGoal(`CPU/chunk <= ${CPU_OVER_INLINE} × inline`, '<=', ratioOf(cpu.worker, cpu.inline) ?? Infinity, CPU_OVER_INLINE),
  ]
  const rate = 1000 / STREAM_INTERVAL_MS
  return {
    id: placement === 'host' ? 'S9' : 'S9m',
    title: `streaming fan-in, ${children.toLocaleString('en-US')} children × ${STREAM_CHUNKS} chunks at ${rate} chunks/s, ${placement === 'host' ? 'model on the host' : 'module model'}`,
    metric: `ms of wall time for the batch, every child started at once (ideal ${STREAM_IDEAL_MS} ms)`,
    unit: 'ms',
    better: 'lower',
    model: placement === 'host' ? HOST_MODEL : `module model '${STREAM_MODEL}' (a fresh ScriptedModel per request, in the child's thread: no RPC per step)`,
    setup: { ...setup, placement },
    inline: wall.inline,
    worker: wall.worker,
    reference: { label: 'ideal', value: STREAM_IDEAL_MS },
    ratio: ratioOf(wall.worker, wall.inline),
    goals,
    met: allMet(goals),
    extra: {
      wallOverIdeal: { inline: wall.inline.median / STREAM_IDEAL_MS, worker: wall.worker.median / STREAM_IDEAL_MS },
      cpuUsPerChunk: cpu,
      eventLoopDelayMs: { p99, max: per('loopMaxMs') },
    },
  }
}

export const s9: Scenario = {
  ids: ['S9', 'S9m'],
  label: 'S9 streaming fan-in',
  units: (plan) => 2 + plan.stream.rounds * 4,
  async run(context): Promise<ScenarioResult[]> {
    const { children, threads, rounds } = context.plan.stream
    // Every child holds a slot from the start; idle threads stay warm between batches (see harness.ts).
    const pool = { minThreads: threads, maxThreads: threads, childrenPerWorker: Math.ceil(children / threads) }
    const transports: Transport[] = (['inline', 'worker'] as const).map((mode) => {
      const bench = benchHost(mode, { pool })
      return { mode, benches: { host: bench, module: withProvider(bench, STREAM_MODEL) } }
    })
    const samples: Record<Placement, Record<Mode, Samples>> = {
      host: { inline: noSamples(), worker: noSamples() },
      module: { inline: noSamples(), worker: noSamples() },
    }
    try {
      // Both hosts' warm-ups at once: they are untimed, and a batch takes its 2 s whatever its size.
      await Promise.all(transports.map((transport) => warmUp(transport, children).then(() => context.progress.advance(1))))
      for (let r = 0; r < rounds; r++) {
        for (const placement of PLACEMENTS) {
          for (const transport of transports) {
            await measure(transport.benches[placement], placement, children, samples[placement][transport.mode])
            context.progress.advance(1)
          }
        }
      }
    } finally {
      await Promise.all(transports.map(({ benches }) => benches.host.host.close()))
    }
    const setup = { children, chunksPerChild: STREAM_CHUNKS, intervalMs: STREAM_INTERVAL_MS, idealMs: STREAM_IDEAL_MS, rounds, loopResolutionMs: RESOLUTION_MS, pool }
    return PLACEMENTS.map((placement) => row(placement, samples[placement], children, setup))
  },
}
