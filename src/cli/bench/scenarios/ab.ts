/**
 * A/B rows: what a feature costs on the worker transport, the same workload with it on against
 * off, in the same run, the two arms taking turns round by round (ABBA order, so drift in the
 * machine and a warming JIT hit both alike). Each arm is its own warm host; a feature switched on
 * process-wide (the diagnostics channels, tracing) is switched on for its arm's rounds alone.
 *
 * - G2, G3: S2's and S3's workloads with every limit set (generous, so none fires) against none:
 *   the host's budget tree, its deadline timer and its counting of every event (CONTRACT.md §11).
 * - O3, O9: S3's and S9's workloads with `instrument()` (a real BasicTracerProvider, batching
 *   into an exporter that drops the spans) and a diagnostics_channel subscriber on all four
 *   channels, against neither (CONTRACT.md §12).
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import { textResponse, type ChildLimits } from '../../../index.js'
import { benchHost, defaultThreads, delegate, HOST_MODEL, saturate, useScript, type BenchHost, type HostSetup } from '../harness.js'
import type { Plan } from '../plan.js'
import { figure } from '../measure/stats.js'
import { idealMs, streamEntry, type StreamShape } from '../stream-script.js'
import type { ScenarioResult } from '../types.js'
import { cpuMeter } from '../measure/usage.js'
import { allMet, ratioGoal, ratioOf, type Scenario, type ScenarioContext } from './scenario.js'

/** Every limit, far beyond what a bench child spends: the cost of counting, never of stopping. */
export const GENEROUS_LIMITS: Required<ChildLimits> = { timeoutMs: 600_000, maxSteps: 1_000, maxTotalTokens: 1_000_000_000 }

/** One arm: a warm host, and what switches its feature on for its rounds (and off after). */
interface Arm {
  bench: BenchHost
  enter(): void
  leave(): void
}

/** One round of an arm's workload: its samples (a time or a rate) and the round's CPU per unit of work. */
type Round = (bench: BenchHost) => Promise<{ samples: number[]; cpuUs: number; units: number }>

interface Sides<T> {
  on: T
  off: T
}

interface Measured {
  samples: Sides<number[]>
  /** µs of host CPU (every thread) per unit of work, one sample a round. */
  cpu: Sides<number[]>
}

const nothing = () => {}

/** Runs `warmup` untimed, then `rounds` of each arm in ABBA order. */
async function alternate(context: ScenarioContext, arms: Sides<Arm>, rounds: number, warmup: Round, round: Round): Promise<Measured> {
  const measured: Measured = { samples: { on: [], off: [] }, cpu: { on: [], off: [] } }
  const run = async (side: keyof Sides<Arm>, work: Round, record: boolean) => {
    const arm = arms[side]
    arm.enter()
    try {
      const { samples, cpuUs, units } = await work(arm.bench)
      if (!record) return
      measured.samples[side].push(...samples)
      measured.cpu[side].push(cpuUs / units)
    } finally {
      arm.leave()
    }
  }
  try {
    await run('off', warmup, false)
    await run('on', warmup, false)
    context.progress.advance(1)
    for (let r = 0; r < rounds; r++) {
      const order: Array<keyof Sides<Arm>> = r % 2 === 0 ? ['off', 'on'] : ['on', 'off']
      for (const side of order) await run(side, round, true)
      context.progress.advance(1)
    }
  } finally {
    await Promise.all([arms.on.bench.host.close(), arms.off.bench.host.close()])
  }
  return measured
}

/** `count` one-step delegations one at a time, each timed whole (S2's sample). */
function oneAtATime(count: number): Round {
  return async (bench) => {
    const script = useScript(bench, count, [textResponse('done')])
    const samples: number[] = []
    const meter = cpuMeter([])
    for (let i = 0; i < count; i++) {
      const t0 = performance.now()
      await delegate(bench)
      samples.push(performance.now() - t0)
    }
    const cpuUs = meter.stop()!
    script.done()
    return { samples, cpuUs, units: count }
  }
}

/** `total` one-step delegations through `inFlight` lanes: one rate sample (S3's). */
function saturated(total: number, inFlight: number): Round {
  return async (bench) => {
    const script = useScript(bench, total, [textResponse('done')])
    const meter = cpuMeter([])
    const t0 = performance.now()
    await saturate(total, inFlight, () => delegate(bench))
    const seconds = (performance.now() - t0) / 1000
    const cpuUs = meter.stop()!
    script.done()
    return { samples: [total / seconds], cpuUs, units: total }
  }
}

/** `children` started at once, each streaming S9's script from the host's model: one wall-time sample. */
function fanIn(children: number, shape: StreamShape): Round {
  return async (bench) => {
    const script = useScript(bench, children, [streamEntry(shape)])
    const meter = cpuMeter([])
    const t0 = performance.now()
    await Promise.all(Array.from({ length: children }, () => delegate(bench)))
    const wall = performance.now() - t0
    const cpuUs = meter.stop()!
    script.done()
    return { samples: [wall], cpuUs, units: children * shape.chunks }
  }
}

const plain = (bench: BenchHost): Arm => ({ bench, enter: nothing, leave: nothing })

/** The governance arms: the same worker host twice, one with every limit as its default. */
function governance(pool: HostSetup['pool']): Sides<Arm> {
  return { on: plain(benchHost('worker', { pool, limits: GENEROUS_LIMITS })), off: plain(benchHost('worker', { pool })) }
}

const CHANNELS = ['subagent-worker:child:start', 'subagent-worker:child:end', 'subagent-worker:step', 'subagent-worker:tool']

/** What tracing needs from the OpenTelemetry SDK (a dev dependency): absent, the O rows are skipped. */
interface Tracing {
  install(): () => void
  /** Spans the exporter was handed (and dropped), once the batch processor handed over what it holds. */
  exported(): Promise<number>
  /** Messages the subscriber heard. */
  heard(): number
}

async function loadTracing(): Promise<Tracing | string> {
  let sdk: typeof import('@opentelemetry/sdk-trace-base')
  let otel: typeof import('../../../otel/index.js')
  try {
    sdk = await import('@opentelemetry/sdk-trace-base')
    otel = await import('../../../otel/index.js')
  } catch (error) {
    return `@opentelemetry/api and @opentelemetry/sdk-trace-base are needed (${error instanceof Error ? error.message : String(error)})`
  }
  let exported = 0
  // Exports nothing: what is measured is making the spans, not shipping them.
  const exporter: import('@opentelemetry/sdk-trace-base').SpanExporter = {
    export(spans, done) {
      exported += spans.length
      done({ code: 0 })
    },
    shutdown: () => Promise.resolve(),
  }
  const provider = new sdk.BasicTracerProvider({ spanProcessors: [new sdk.BatchSpanProcessor(exporter)] })
  // A subscriber as an APM would attach one: it reads a field of every message.
  let heard = 0
  const listener = (message: unknown) => void (heard += (message as { depth: number }).depth > 0 ? 1 : 0)
  return {
    install() {
      const uninstall = otel.instrument({ tracerProvider: provider })
      for (const name of CHANNELS) subscribe(name, listener)
      return () => {
        for (const name of CHANNELS) unsubscribe(name, listener)
        uninstall()
      }
    },
    exported: async () => {
      await provider.forceFlush()
      return exported
    },
    heard: () => heard,
  }
}

/** The instrumentation arms: the same worker host twice; the `on` one traced and listened to during its rounds. */
function instrumentation(pool: HostSetup['pool'], tracing: Tracing): Sides<Arm> {
  let uninstall = nothing
  const on: Arm = {
    bench: benchHost('worker', { pool }),
    enter: () => void (uninstall = tracing.install()),
    leave: () => {
      uninstall()
      uninstall = nothing
    },
  }
  return { on, off: plain(benchHost('worker', { pool })) }
}

interface Row {
  id: 'G2' | 'G3' | 'O3' | 'O9'
  title: string
  metric: string
  unit: ScenarioResult['unit']
  better: ScenarioResult['better']
  setup: Record<string, unknown>
  labels: { on: string; off: string }
  measured: Measured
  /** The goal on the on/off ratio of the medians, as the row states it; none for a row that only reports. */
  goal?: { text: string; comparison: '<=' | '>='; threshold: number }
  /** A goal on the CPU ratio too (O9). */
  cpuGoal?: { text: string; threshold: number }
  extra?: Record<string, unknown>
  model?: string
}

function row(spec: Row): ScenarioResult {
  const on = figure(spec.measured.samples.on, spec.better)
  const off = figure(spec.measured.samples.off, spec.better)
  const cpuOn = figure(spec.measured.cpu.on, 'lower')
  const cpuOff = figure(spec.measured.cpu.off, 'lower')
  const ratio = ratioOf(on, off) ?? NaN
  const cpuRatio = ratioOf(cpuOn, cpuOff) ?? NaN
  const goals = []
  if (spec.goal) goals.push(ratioGoal('worker', spec.goal.text, spec.goal.comparison, ratio, spec.goal.threshold, off.median))
  if (spec.cpuGoal) goals.push(ratioGoal('worker', spec.cpuGoal.text, '<=', cpuRatio, spec.cpuGoal.threshold))
  return {
    id: spec.id,
    title: spec.title,
    metric: spec.metric,
    unit: spec.unit,
    better: spec.better,
    model: spec.model ?? HOST_MODEL,
    setup: spec.setup,
    inline: null,
    worker: on,
    process: null,
    ab: { on: spec.labels.on, off: spec.labels.off, offFigure: off, ratio, cpuRatio },
    ratio: null,
    processRatio: { inline: null, worker: null },
    goals,
    met: allMet(goals),
    extra: { cpuUsPerUnit: { on: cpuOn, off: cpuOff }, ...spec.extra },
  }
}

const abRounds = (plan: Plan) => plan.ab.rounds

const GOVERNANCE_LABELS = { on: `every limit set (${JSON.stringify(GENEROUS_LIMITS)}, none reached)`, off: 'no limits' }
const WITHIN = 0.05

export const g2: Scenario = {
  ids: ['G2'],
  label: 'G2 one-step delegation, limits on/off',
  units: (plan) => abRounds(plan) + 1,
  async run(context): Promise<ScenarioResult[]> {
    const { warmup, batch } = context.plan.latency
    const threads = defaultThreads()
    const pool = { minThreads: threads, maxThreads: threads }
    const measured = await alternate(context, governance(pool), abRounds(context.plan), oneAtATime(warmup), oneAtATime(batch))
    return [
      row({
        id: 'G2',
        title: 'S2 (one-step delegation, one at a time) on the worker transport, every limit set against none',
        metric: 'ms for one whole delegation',
        unit: 'ms',
        better: 'lower',
        setup: { warmup, samplesPerRound: batch, rounds: abRounds(context.plan), pool, limits: GENEROUS_LIMITS },
        labels: GOVERNANCE_LABELS,
        measured,
        goal: { text: 'p50 with limits <= 1.05 × without', comparison: '<=', threshold: 1 + WITHIN },
      }),
    ]
  },
}

export const g3: Scenario = {
  ids: ['G3'],
  label: 'G3 throughput, limits on/off',
  units: (plan) => abRounds(plan) + 1,
  async run(context): Promise<ScenarioResult[]> {
    const { warmup, total, inFlight } = context.plan.throughput
    const pool = s3Pool(inFlight)
    const measured = await alternate(context, governance(pool), abRounds(context.plan), saturated(warmup, inFlight), saturated(total, inFlight))
    return [
      row({
        id: 'G3',
        title: `S3 (throughput, ${inFlight} in flight) on the worker transport, every limit set against none`,
        metric: 'delegations/s per round',
        unit: 'delegations/s',
        better: 'higher',
        setup: { warmup, total, inFlight, rounds: abRounds(context.plan), pool, limits: GENEROUS_LIMITS },
        labels: GOVERNANCE_LABELS,
        measured,
        goal: { text: 'rate with limits >= 0.95 × without', comparison: '>=', threshold: 1 - WITHIN },
      }),
    ]
  },
}

function s3Pool(inFlight: number) {
  const threads = defaultThreads()
  return { minThreads: threads, maxThreads: threads, childrenPerWorker: Math.ceil(inFlight / threads) }
}

const INSTRUMENT_LABELS = {
  on: 'instrument() with a BasicTracerProvider (BatchSpanProcessor, an exporter that drops the spans) and a subscriber on the four channels',
  off: 'neither',
}

/** The O rows' tracing, loaded once per run; a string says why it cannot be. */
let tracingLoaded: Promise<Tracing | string> | undefined
const tracingOf = () => (tracingLoaded ??= loadTracing())

async function withTracing(build: (tracing: Tracing) => Promise<ScenarioResult[]>): Promise<ScenarioResult[]> {
  const tracing = await tracingOf()
  if (typeof tracing === 'string') {
    process.stderr.write(`the O rows are skipped: ${tracing}\n`)
    return []
  }
  return build(tracing)
}

export const o3: Scenario = {
  ids: ['O3'],
  label: 'O3 throughput, instrumentation on/off',
  units: (plan) => abRounds(plan) + 1,
  run: (context) =>
    withTracing(async (tracing) => {
      const { warmup, total, inFlight } = context.plan.throughput
      const pool = s3Pool(inFlight)
      const before = { spans: await tracing.exported(), messages: tracing.heard() }
      const measured = await alternate(context, instrumentation(pool, tracing), abRounds(context.plan), saturated(warmup, inFlight), saturated(total, inFlight))
      return [
        row({
          id: 'O3',
          title: `S3 (throughput, ${inFlight} in flight) on the worker transport, traced and listened to against neither`,
          metric: 'delegations/s per round',
          unit: 'delegations/s',
          better: 'higher',
          setup: { warmup, total, inFlight, rounds: abRounds(context.plan), pool },
          labels: INSTRUMENT_LABELS,
          measured,
          extra: { spansExported: (await tracing.exported()) - before.spans, messagesHeard: tracing.heard() - before.messages },
        }),
      ]
    }),
}

export const o9: Scenario = {
  ids: ['O9'],
  label: 'O9 streaming fan-in, instrumentation on/off',
  units: (plan) => abRounds(plan) + 1,
  run: (context) =>
    withTracing(async (tracing) => {
      const { children, threads, chunks, intervalMs } = context.plan.stream
      const pool = { minThreads: threads, maxThreads: threads, childrenPerWorker: Math.ceil(children / threads) }
      const before = { spans: await tracing.exported(), messages: tracing.heard() }
      const batch = fanIn(children, { chunks, intervalMs })
      const measured = await alternate(context, instrumentation(pool, tracing), abRounds(context.plan), batch, batch)
      return [
        row({
          id: 'O9',
          title: `S9 (streaming fan-in, ${children.toLocaleString('en-US')} children × ${chunks} chunks, model on the host) on the worker transport, traced and listened to against neither`,
          metric: `ms of wall time for the batch (ideal ${idealMs({ chunks, intervalMs })} ms)`,
          unit: 'ms',
          better: 'lower',
          setup: { children, chunksPerChild: chunks, intervalMs, rounds: abRounds(context.plan), pool },
          labels: INSTRUMENT_LABELS,
          measured,
          goal: { text: 'wall traced <= 1.10 × untraced', comparison: '<=', threshold: 1.1 },
          cpuGoal: { text: 'CPU/chunk traced <= 1.10 × untraced', threshold: 1.1 },
          extra: { spansExported: (await tracing.exported()) - before.spans, messagesHeard: tracing.heard() - before.messages },
        }),
      ]
    }),
}
