/**
 * S9: streaming fan-in. A batch of children start at once and each streams the plan's text
 * chunks at its pace (the full plan: 100 at 50 chunks/s, so the ideal batch takes 2 s on any
 * transport); what is measured is how far
 * behind that the host falls, what each chunk costs in CPU (the whole host process, every
 * thread, and the process transport's runner processes), and how late the host's event loop
 * runs meanwhile. Two model placements, each on every transport in the same run: a ScriptedModel
 * on the host (on workers, processes and nodes, each chunk is an RPC reply to the runner and an
 * event back) and a module model where the child runs (only the events cross). One host per
 * transport serves both placements through two parents. The remote transport (when the run has
 * it) is measured and reported, with no goal; its CPU counts its node processes, and the Redis
 * server's is read apart.
 *
 * S9u and S9um are the same run with a model written as a user would write it (user-model.ts: a
 * plain async generator awaiting a timer between chunks) in place of the ScriptedModel, so the
 * goals are read on a model they were not tuned on.
 */
import type { ScenarioId } from '../args.js'
import { benchHost, delegate, HOST_MODEL, useScript, withProvider, type BenchHost } from '../harness.js'
import { delayMs, loopMonitor, loopTurns, RESOLUTION_MS } from '../measure/loop-delay.js'
import { runnerPids } from '../runners.js'
import { idealMs, STREAM_MODEL, streamEntry, streamModelId, type StreamShape } from '../stream-script.js'
import { USER_HOST_MODEL, USER_STREAM_MODEL, userStreamModel } from '../user-model.js'
import { LOCAL_MODES, type ByVariant, type Figure, type LocalMode, type Mode, type ScenarioResult } from '../types.js'
import { cpuMeter, otherCpuMeter } from '../measure/usage.js'
import { allMet, processRatioOf, ratioGoal, ratioOf, remoteFields, setupWithRemote, valueGoal, type Scenario, type ScenarioContext } from './scenario.js'
import { figure } from '../measure/stats.js'

type Placement = 'host' | 'module'

/** One transport's host, its two parents (one per model placement) and its runner processes (process transport) or nodes (remote). */
interface Transport {
  mode: Mode
  benches: Record<Placement, BenchHost>
  /** The same host's two parents for the warm-up's shape. */
  warm: Record<Placement, BenchHost>
  runners: number[]
}

interface Samples {
  wallMs: number[]
  /** Empty where the runners' CPU cannot be read (see usage.ts). */
  cpuUsPerChunk: number[]
  /** The Redis server's CPU per chunk (remote only, where it can be read). */
  redisCpuUsPerChunk: number[]
  loopP99Ms: number[]
  loopMaxMs: number[]
}

/** The goals, judged on the worker medians; the CPU goal is the same for both placements. The process transport has none here. */
const GOALS: Record<Placement, { wallOverIdeal: number; loopP99Ms: number }> = {
  host: { wallOverIdeal: 1.6, loopP99Ms: 50 },
  module: { wallOverIdeal: 1.3, loopP99Ms: 20 },
}
const CPU_OVER_INLINE = 1.5

const PLACEMENTS: readonly Placement[] = ['host', 'module']

/** Which model streams: the library's ScriptedModel (S9, S9m) or one a user would write (S9u, S9um). */
interface StreamModel {
  ids: Record<Placement, ScenarioId>
  label: string
  /** How a row's title names the model. */
  titles: Record<Placement, string>
  /** The row's model field. */
  models: Record<Placement, string>
  /** A transport host's two parents, one per placement. */
  parents(bench: BenchHost, shape: StreamShape): Record<Placement, BenchHost>
  /** Registers the host placement's model for a batch of `children`; returns its unregister. */
  onHost(bench: BenchHost, children: number, shape: StreamShape): () => void
}

const SCRIPTED: StreamModel = {
  ids: { host: 'S9', module: 'S9m' },
  label: 'S9 streaming fan-in',
  titles: { host: 'model on the host', module: 'module model' },
  models: { host: HOST_MODEL, module: `module model '${STREAM_MODEL}' (a fresh ScriptedModel per request, in the child's runner, thread or process: no RPC per step)` },
  parents: (bench, shape) => ({ host: bench, module: withProvider(bench, STREAM_MODEL, streamModelId(shape)) }),
  // One script entry per child: a ScriptedModel plays each entry once.
  onHost: (bench, children, shape) => useScript(bench, children, [streamEntry(shape)]).done,
}

const USER: StreamModel = {
  ids: { host: 'S9u', module: 'S9um' },
  label: 'S9u streaming fan-in, user-written model',
  titles: { host: 'user-written model on the host', module: 'user-written module model' },
  models: {
    host: `a user-written async generator on the host, awaiting a timer between chunks (one RPC round trip per step on worker, process and remote)`,
    module: `module model '${USER_STREAM_MODEL}' (a user-written async generator awaiting a timer between chunks, in the child's runner: no RPC per step)`,
  },
  parents: (bench, shape) => ({ host: withProvider(bench, USER_HOST_MODEL, streamModelId(shape)), module: withProvider(bench, USER_STREAM_MODEL, streamModelId(shape)) }),
  // Stateless, so the one object serves every child of the batch.
  onHost: (bench) => bench.host.models.register(USER_HOST_MODEL, userStreamModel),
}

/** Registers the host placement's model; the module model reads the shape from its model id. Returns its unregister. */
function scriptFor(model: StreamModel, bench: BenchHost, placement: Placement, children: number, shape: StreamShape): () => void {
  return placement === 'host' ? model.onHost(bench, children, shape) : () => {}
}

/** Starts `children` at once and waits until each one completed and was disposed. */
async function fanIn(bench: BenchHost, children: number): Promise<void> {
  await Promise.all(Array.from({ length: children }, () => delegate(bench)))
}

/**
 * Untimed: `warmup` children in batches of `children`, half on each placement at once, so every
 * runner has imported the module, run both paths and compiled its code. A runner sees a third of
 * them, and with one batch it was still compiling through the timed ones (V8's helper threads
 * doubled the worker's CPU per chunk: BENCHMARKS.md), a fresh runner's cost (S10's), not a
 * streaming child's; S3-S5 warm their runners for the same reason. The warm-up streams the same
 * chunks one a millisecond (`warmShape`): the same code, in a fraction of the time.
 */
async function warmUp(model: StreamModel, transport: Transport, warmup: number, children: number, shape: StreamShape): Promise<void> {
  for (let done = 0; done < warmup; done += children) {
    const batch = Math.min(children, warmup - done)
    const onHost = Math.ceil(batch / 2)
    const unregister = scriptFor(model, transport.warm.host, 'host', onHost, shape)
    await Promise.all([fanIn(transport.warm.host, onHost), fanIn(transport.warm.module, batch - onHost)])
    unregister()
  }
}

/** The warm-up's stream: the timed one's chunks, one a millisecond. */
const warmShape = ({ chunks }: StreamShape): StreamShape => ({ chunks, intervalMs: 1 })

async function measure(model: StreamModel, transport: Transport, placement: Placement, children: number, shape: StreamShape, into: Samples, redisPids: readonly number[]): Promise<void> {
  const bench = transport.benches[placement]
  const done = scriptFor(model, bench, placement, children, shape)
  const monitor = loopMonitor()
  monitor.enable()
  // Ticks before and after the batch (see loop-delay.ts).
  await loopTurns()
  const meter = cpuMeter(transport.runners)
  const redisMeter = otherCpuMeter(transport.mode === 'remote' ? redisPids : [])
  const t0 = performance.now()
  await fanIn(bench, children)
  const wall = performance.now() - t0
  const cpuUs = meter.stop()
  const redisUs = redisMeter.stop()
  await loopTurns()
  monitor.disable()
  done()
  into.wallMs.push(wall)
  if (cpuUs !== null) into.cpuUsPerChunk.push(cpuUs / (children * shape.chunks))
  if (redisUs !== null) into.redisCpuUsPerChunk.push(redisUs / (children * shape.chunks))
  into.loopP99Ms.push(delayMs(monitor.percentile(99)))
  into.loopMaxMs.push(delayMs(monitor.max))
}

const noSamples = (): Samples => ({ wallMs: [], cpuUsPerChunk: [], redisCpuUsPerChunk: [], loopP99Ms: [], loopMaxMs: [] })

/** A figure of the samples, or null where there are none (runners that cannot be read). */
const figureOrNull = (samples: number[]): Figure | null => (samples.length > 0 ? figure(samples, 'lower') : null)

function row(model: StreamModel, context: ScenarioContext, placement: Placement, samples: Record<Mode, Samples>, children: number, shape: StreamShape, setup: Record<string, unknown>): ScenarioResult {
  const ideal = idealMs(shape)
  const measured = context.remote !== undefined
  const local = (key: keyof Samples) => ({ inline: figure(samples.inline[key], 'lower'), worker: figure(samples.worker[key], 'lower'), process: figure(samples.process[key], 'lower') })
  // Every transport's figures; remote's only when the run has the remote column.
  const per = (key: keyof Samples): ByVariant & Record<LocalMode, Figure> => ({ ...local(key), ...(measured ? { remote: figure(samples.remote[key], 'lower') } : {}) })
  const wall = per('wallMs')
  // The process transport's and the nodes' CPU samples are missing where they cannot be read (usage.ts).
  const cpu: ByVariant = {
    inline: figure(samples.inline.cpuUsPerChunk, 'lower'),
    worker: figure(samples.worker.cpuUsPerChunk, 'lower'),
    process: figureOrNull(samples.process.cpuUsPerChunk),
    ...(measured ? { remote: figureOrNull(samples.remote.cpuUsPerChunk) } : {}),
  }
  const redisCpu = figureOrNull(samples.remote.redisCpuUsPerChunk)
  const p99 = per('loopP99Ms')
  const goal = GOALS[placement]
  const goals = [
    ratioGoal('worker', `wall <= ${goal.wallOverIdeal} × ideal`, '<=', wall.worker.median / ideal, goal.wallOverIdeal, ideal),
    valueGoal('worker', `event-loop p99 <= ${goal.loopP99Ms} ms`, '<=', p99.worker.median, goal.loopP99Ms),
    ratioGoal('worker', `CPU/chunk <= ${CPU_OVER_INLINE} × inline`, '<=', ratioOf(cpu.worker, cpu.inline) ?? Infinity, CPU_OVER_INLINE),
  ]
  const rate = 1000 / shape.intervalMs
  return {
    id: model.ids[placement],
    title: `streaming fan-in, ${children.toLocaleString('en-US')} children × ${shape.chunks} chunks at ${rate} chunks/s, ${model.titles[placement]}`,
    metric: `ms of wall time for the batch, every child started at once (ideal ${ideal} ms)`,
    unit: 'ms',
    better: 'lower',
    model: model.models[placement],
    setup: { ...setup, placement },
    inline: wall.inline,
    worker: wall.worker,
    process: wall.process,
    ...remoteFields(context, { worker: wall.worker, remote: wall.remote ?? undefined }),
    reference: { label: 'ideal', value: ideal },
    ratio: ratioOf(wall.worker, wall.inline),
    processRatio: processRatioOf(wall),
    goals,
    met: allMet(goals),
    extra: {
      wallOverIdeal: {
        inline: wall.inline.median / ideal,
        worker: wall.worker.median / ideal,
        process: wall.process.median / ideal,
        ...(wall.remote ? { remote: wall.remote.median / ideal } : {}),
      },
      cpuUsPerChunk: cpu,
      ...(redisCpu ? { redisCpuUsPerChunk: redisCpu } : {}),
      eventLoopDelayMs: { p99, max: per('loopMaxMs') },
    },
  }
}

/** One model's scenario: both placements on every transport, in one run. */
const streamScenario = (model: StreamModel): Scenario => ({
  ids: [model.ids.host, model.ids.module],
  label: model.label,
  // One unit for the warm-ups (run at once), one per measured batch (the remote column's counted in remoteUnits).
  units: (plan) => 1 + plan.stream.rounds * PLACEMENTS.length * LOCAL_MODES.length,
  remoteUnits: (plan) => plan.stream.rounds * PLACEMENTS.length,
  async run(context): Promise<ScenarioResult[]> {
    const { children, threads, rounds, chunks, intervalMs, warmup } = context.plan.stream
    const shape = { chunks, intervalMs }
    // Every child holds a slot from the start; idle threads stay warm between batches (see harness.ts).
    const pool = { minThreads: threads, maxThreads: threads, childrenPerWorker: Math.ceil(children / threads) }
    const remote = context.remote?.rig
    await remote?.nodes(pool)
    const modes: Mode[] = remote ? [...LOCAL_MODES, 'remote'] : [...LOCAL_MODES]
    const transports: Transport[] = modes.map((mode) => {
      const bench = benchHost(mode, { pool, ...(remote ? { remote } : {}) })
      return { mode, benches: model.parents(bench, shape), warm: model.parents(bench, warmShape(shape)), runners: [] }
    })
    const samples: Record<Placement, Record<Mode, Samples>> = {
      host: { inline: noSamples(), worker: noSamples(), process: noSamples(), remote: noSamples() },
      module: { inline: noSamples(), worker: noSamples(), process: noSamples(), remote: noSamples() },
    }
    const redisPids = remote?.info.redisPid ? [remote.info.redisPid] : []
    try {
      for (const transport of transports) transport.runners = await runnerPids(transport.benches.host, threads)
      // Every host's warm-up at once: they are untimed, and a batch takes its ideal time whatever its size.
      await Promise.all(transports.map((transport) => warmUp(model, transport, warmup, children, warmShape(shape))))
      context.progress.advance(1)
      for (let r = 0; r < rounds; r++) {
        for (const placement of PLACEMENTS) {
          for (const transport of transports) {
            await measure(model, transport, placement, children, shape, samples[placement][transport.mode], redisPids)
            context.progress.advance(1)
          }
        }
      }
    } finally {
      await Promise.all(transports.map(({ benches }) => benches.host.host.close()))
    }
    const setup = setupWithRemote(context, { children, chunksPerChild: chunks, intervalMs, idealMs: idealMs(shape), rounds, warmup, loopResolutionMs: RESOLUTION_MS, pool })
    return PLACEMENTS.map((placement) => row(model, context, placement, samples[placement], children, shape, setup))
  },
})

export const s9 = streamScenario(SCRIPTED)
export const s9u = streamScenario(USER)
