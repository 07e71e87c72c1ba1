/**
 * S3 and S4: many delegations in flight. Each round pushes `total` delegations through
 * `inFlight` lanes and yields one rate sample and one CPU-per-delegation sample (the whole host
 * process, every thread, and the process transport's runner processes or the remote transport's
 * node processes: a transport's rate is worth less if it burns more cores to get there); rounds
 * take the transports in turn. The remote rounds also read the Redis server's CPU, apart.
 */
import { textResponse, toolCallResponse, type PoolOptions } from '../../../index.js'
import { benchHost, defaultThreads, delegate, HOST_MODEL, saturate, useScript, type BenchHost, type Step, type Variant } from '../harness.js'
import { runnerPids } from '../runners.js'
import { summarize, figure } from '../measure/stats.js'
import type { ByVariant, ScenarioResult } from '../types.js'
import { cpuMeter, otherCpuMeter } from '../measure/usage.js'
import { allMet, processRatioOf, ratioGoal, ratioOf, remoteFields, setupWithRemote, withRemote, type Scenario, type ScenarioContext } from './scenario.js'

interface Load {
  warmup: number
  total: number
  inFlight: number
  rounds: number
  steps: Step[]
  /** Every runner started up front (minThreads = maxThreads), so the process transport's are all found before the first round. */
  pool: PoolOptions & { maxThreads: number }
  variants: readonly Variant[]
}

interface Rates {
  rates: Record<Variant, number[]>
  latencies: Record<Variant, number[]>
  /** µs of CPU per delegation (host and runner or node processes), one sample a round; none where the runners cannot be read. */
  cpu: Record<Variant, number[]>
  /** µs of the Redis server's CPU per delegation in each remote round; none where it cannot be read. */
  redisCpu: number[]
}

const none = (): Record<Variant, number[]> => ({ inline: [], worker: [], process: [], remote: [], workerModuleModel: [] })

async function pump(context: ScenarioContext, load: Load): Promise<Rates> {
  const remote = context.remote?.rig
  await remote?.nodes(load.pool)
  const hosts = load.variants.map((variant) => benchHost(variant, { pool: load.pool, ...(remote ? { remote } : {}) }))
  const rates = none()
  const latencies = none()
  const cpu = none()
  const redisCpu: number[] = []
  const runners = new Map<BenchHost, number[]>()
  const redisPids = remote?.info.redisPid ? [remote.info.redisPid] : []
  const round = async (bench: BenchHost, total: number, record: boolean) => {
    const script = useScript(bench, total, load.steps)
    const meter = cpuMeter(runners.get(bench) ?? [])
    const redisMeter = otherCpuMeter(bench.mode === 'remote' ? redisPids : [])
    const t0 = performance.now()
    await saturate(total, load.inFlight, () => delegate(bench), record ? (ms) => latencies[bench.variant].push(ms) : undefined)
    const seconds = (performance.now() - t0) / 1000
    const cpuUs = meter.stop()
    const redisUs = redisMeter.stop()
    script.done()
    if (!record) return
    rates[bench.variant].push(total / seconds)
    if (cpuUs !== null) cpu[bench.variant].push(cpuUs / total)
    if (redisUs !== null) redisCpu.push(redisUs / total)
  }
  try {
    for (const bench of hosts) runners.set(bench, await runnerPids(bench, load.pool.maxThreads))
    for (const bench of hosts) await round(bench, load.warmup, false)
    context.progress.advance(1)
    for (let r = 0; r < load.rounds; r++) {
      for (const bench of hosts) await round(bench, load.total, true)
      context.progress.advance(1)
    }
  } finally {
    await Promise.all(hosts.map(({ host }) => host.close()))
  }
  return { rates, latencies, cpu, redisCpu }
}

/** Each measured variant's CPU per delegation; remote's only when the run has the remote column. */
function cpuFigures(context: ScenarioContext, cpu: Record<Variant, number[]>): ByVariant {
  const moduleModel = cpu.workerModuleModel.length > 0 ? { workerModuleModel: figure(cpu.workerModuleModel, 'lower') } : {}
  const process = cpu.process.length > 0 ? figure(cpu.process, 'lower') : null
  const remote = context.remote ? { remote: cpu.remote.length > 0 ? figure(cpu.remote, 'lower') : null } : {}
  return { inline: figure(cpu.inline, 'lower'), worker: figure(cpu.worker, 'lower'), process, ...remote, ...moduleModel }
}

/** The remote rounds' Redis CPU per delegation, when it could be read. */
function redisExtra(redisCpu: number[]) {
  return redisCpu.length > 0 ? { redisCpuUsPerDelegation: figure(redisCpu, 'lower') } : {}
}

const rateOf = (context: ScenarioContext, rates: Record<Variant, number[]>) => (context.remote ? figure(rates.remote, 'higher') : undefined)

/** Per-delegation latency inside a throughput run: what a caller waits while the host is saturated. */
function latencyExtra(latencies: Record<Variant, number[]>) {
  const measured = Object.entries(latencies).filter(([, samples]) => samples.length > 0)
  return { delegationLatencyMs: Object.fromEntries(measured.map(([variant, samples]) => [variant, summarize(samples)])) }
}

function threadsFor(inFlight: number) {
  const threads = defaultThreads()
  return { minThreads: threads, maxThreads: threads, childrenPerWorker: Math.ceil(inFlight / threads) }
}

export const s3: Scenario = {
  ids: ['S3'],
  label: 'S3 throughput, zero model latency',
  units: (plan) => plan.throughput.rounds + 1,
  async run(context): Promise<ScenarioResult[]> {
    const { warmup, total, inFlight, rounds } = context.plan.throughput
    // Enough slots for every lane: the admission queue would otherwise cap concurrency at the thread count.
    const pool = threadsFor(inFlight)
    const variants = withRemote(context, ['inline', 'worker', 'workerModuleModel', 'process'] as const)
    const { rates, latencies, cpu, redisCpu } = await pump(context, { warmup, total, inFlight, rounds, steps: [textResponse('done')], pool, variants })
    const inline = figure(rates.inline, 'higher')
    const worker = figure(rates.worker, 'higher')
    const proc = figure(rates.process, 'higher')
    const remote = rateOf(context, rates)
    const ratio = ratioOf(worker, inline) ?? 0
    const processRatio = processRatioOf({ inline, worker, process: proc })
    const cpuUsPerDelegation = cpuFigures(context, cpu)
    const goals = [
      ratioGoal('worker', "rate >= inline's", '>=', ratio, 1, inline.median),
      ratioGoal('worker', 'CPU/delegation <= 2 × inline', '<=', ratioOf(cpuUsPerDelegation.worker, cpuUsPerDelegation.inline) ?? Infinity, 2),
      ratioGoal('process', "rate >= 25 % of worker's", '>=', processRatio.worker ?? 0, 0.25, worker.median),
    ]
    // The BullMQ floor is measured after the rounds, so the nodes and the floor's workers never share the machine.
    const bullmqFloor = remote ? await context.remote!.floor.throughput() : undefined
    if (remote && bullmqFloor) goals.push(ratioGoal('remote', "rate >= 50 % of the BullMQ floor's", '>=', ratioOf(remote, bullmqFloor) ?? 0, 0.5, bullmqFloor.median))
    return [
      {
        id: 'S3',
        title: `throughput, zero model latency, ${inFlight} in flight, ${total.toLocaleString('en-US')} delegations a round`,
        metric: 'delegations/s per round (start → result → dispose)',
        unit: 'delegations/s',
        better: 'higher',
        model: HOST_MODEL,
        setup: setupWithRemote(context, { warmup, total, inFlight, rounds, steps: 1, pool }),
        inline,
        worker,
        process: proc,
        floor: await context.floor.throughput({ threads: pool.maxThreads, concurrentTasksPerWorker: pool.childrenPerWorker }),
        channelFloor: await context.channelFloor.throughput({ threads: pool.maxThreads }),
        ...remoteFields(context, { worker, remote }, bullmqFloor),
        workerModuleModel: figure(rates.workerModuleModel, 'higher'),
        ratio,
        processRatio,
        goals,
        met: allMet(goals),
        extra: { cpuUsPerDelegation, ...redisExtra(redisCpu), ...latencyExtra(latencies) },
      },
    ]
  },
}

export const s4: Scenario = {
  ids: ['S4'],
  label: 'S4 throughput, 20 ms model latency',
  units: (plan) => plan.io.rounds + 1,
  async run(context): Promise<ScenarioResult[]> {
    const { warmup, total, inFlight, rounds, latencyMs } = context.plan.io
    const pool = threadsFor(inFlight)
    // Two model steps with a (free) module tool between them, each step taking latencyMs on the host.
    const steps: Step[] = [
      { delayMs: latencyMs, chunks: toolCallResponse('call-1', 'burn', { iterations: 0 }) },
      { delayMs: latencyMs, chunks: textResponse('done') },
    ]
    const { rates, latencies, cpu, redisCpu } = await pump(context, { warmup, total, inFlight, rounds, steps, pool, variants: withRemote(context, ['inline', 'worker', 'process'] as const) })
    const inline = figure(rates.inline, 'higher')
    const worker = figure(rates.worker, 'higher')
    const proc = figure(rates.process, 'higher')
    const remote = rateOf(context, rates)
    const ratio = ratioOf(worker, inline) ?? 0
    const goal = ratioGoal('worker', '>= 90 % of inline', '>=', ratio, 0.9, inline.median)
    return [
      {
        id: 'S4',
        title: `throughput, ${latencyMs} ms model latency per step, ${inFlight.toLocaleString('en-US')} in flight`,
        metric: `delegations/s per round of ${total.toLocaleString('en-US')} (2 steps + 1 module tool call each)`,
        unit: 'delegations/s',
        better: 'higher',
        model: HOST_MODEL,
        setup: setupWithRemote(context, { warmup, total, inFlight, rounds, steps: 2, latencyMsPerStep: latencyMs, pool }),
        inline,
        worker,
        process: proc,
        ...remoteFields(context, { worker, remote }),
        ratio,
        processRatio: processRatioOf({ inline, worker, process: proc }),
        goals: [goal],
        met: allMet([goal]),
        extra: { cpuUsPerDelegation: cpuFigures(context, cpu), ...redisExtra(redisCpu), ...latencyExtra(latencies) },
      },
    ]
  },
}
