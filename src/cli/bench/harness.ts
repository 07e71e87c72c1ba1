/**
 * What every scenario shares: a host per transport with the bench module, a parent agent, and
 * one delegation (start → result → dispose) that fails loudly if the child did not finish the
 * way the scenario expects, since a benchmark of failing runs measures nothing.
 */
import { availableParallelism } from 'node:os'
import { createHost, createMemoryStore, ScriptedModel, type Agent, type ChildLimits, type Host, type PoolOptions, type ScriptEntry, type StreamChunk, type SubagentResult, type SubagentRun } from '../../index.js'
import { sleep as abortableSleep } from '../../agent/models/sleep.js'
import { BENCH_MODULE } from './module-url.js'
import type { RemoteRig } from './remote.js'
import type { Mode } from './types.js'


/** The model name children use; each phase registers its own ScriptedModel under it. */
const MODEL = 'bench'

/** The module model's name (see module.ts): zero RPC, the step runs where the child runs. */
export const MODULE_MODEL = 'bench-echo'

export const HOST_MODEL = 'ScriptedModel on the host (one RPC round trip per step on worker, process and remote)'

/** The library's default thread count for this machine, started up front so the pool is warm. */
export function defaultThreads(): number {
  return Math.max(1, Math.round(availableParallelism() * 1.5))
}

/**
 * Which figure a host produces: each transport with the host-placed ScriptedModel, and the
 * worker transport with a module model, which shows how much of the worker's cost is the RPC.
 */
export type Variant = Mode | 'workerModuleModel'

export const modeOf = (variant: Variant): Mode => (variant === 'workerModuleModel' ? 'worker' : variant)

export interface BenchHost {
  host: Host
  parent: Agent
  mode: Mode
  variant: Variant
  /** The remote transport's node processes (their CPU counts with the host's); none for the others. */
  nodePids: readonly number[]
}

export interface HostSetup {
  /** Ignored by the remote transport: its nodes are sized when the bench starts them (remote.ts). */
  pool?: PoolOptions
  abortGraceMs?: number
  /** The host's default limits for every child (the governance rows, G2 and G3). */
  limits?: ChildLimits
  /** Required for the remote variant: the nodes and the Redis it runs on. */
  remote?: RemoteRig
}

export function benchHost(variant: Variant, setup: HostSetup = {}): BenchHost {
  const mode = modeOf(variant)
  const shared = {
    // Transcripts are kept while their children live and dropped when they are disposed: the
    // default store keeps every one, and a host of tens of thousands of delegations then grows its
    // heap with each, so every round would collect a larger heap than the round before it.
    store: createMemoryStore({ retain: false }),
    ...(setup.abortGraceMs === undefined ? {} : { abortGraceMs: setup.abortGraceMs }),
    ...(setup.limits === undefined ? {} : { limits: setup.limits }),
  }
  let host: Host
  let nodePids: readonly number[] = []
  if (mode === 'remote') {
    if (!setup.remote) throw new Error('a remote bench host needs the remote rig (remote.ts)')
    // The nodes serve the bench module (--agent-module), so children load the same tool code there.
    host = createHost({ transport: setup.remote.transport(), agentModule: BENCH_MODULE, ...shared })
    nodePids = setup.remote.nodePids
  } else {
    host = createHost({
      isolation: mode,
      // A child process may read only this package, its dependencies and the agent module: the
      // bench module imports nothing else (the library, stream-script.js, work.js), so the process
      // transport runs with its default sandbox, no grant.
      agentModule: BENCH_MODULE,
      // Idle runners must not exit between a scenario's rounds: that would measure their start-up.
      pool: { idleTimeoutMs: 600_000, ...setup.pool },
      ...shared,
    })
  }
  // Children inherit the parent's provider, so the variant's model is chosen here once.
  const provider = variant === 'workerModuleModel' ? MODULE_MODEL : MODEL
  const parent = host.createAgent({ options: { provider, model: 'scripted' } })
  return { host, parent, mode, variant, nodePids }
}

/**
 * Another parent on the same host whose children use `provider` (and `model`, the id a module
 * model reads its parameters from): S9 runs both model placements on one host.
 */
export function withProvider(bench: BenchHost, provider: string, model = 'scripted'): BenchHost {
  return { ...bench, parent: bench.host.createAgent({ options: { provider, model } }) }
}

/** One model step of a child's turn: its answer, after `delayMs` of model latency where given. */
export type Step = StreamChunk[] | { delayMs: number; chunks: StreamChunk[] }

/**
 * Registers a fresh ScriptedModel for one phase of `count` delegations, each taking `steps` (one
 * entry per model request: any entry when it is the only one, else a list of steps), and returns
 * a function that unregisters it. A fresh model per phase keeps the requests it records from
 * piling up across the whole run.
 */
export function useScript(bench: BenchHost, count: number, steps: readonly [ScriptEntry] | readonly Step[]): { model: ScriptedModel; done(): void } {
  if (bench.variant === 'workerModuleModel') return { model: new ScriptedModel([]), done() {} }
  let perChild: readonly ScriptEntry[] = steps
  if (steps.length > 1) {
    const own = ownStep(steps as readonly Step[])
    perChild = steps.map(() => own)
  }
  const script: ScriptEntry[] = []
  for (let i = 0; i < count; i++) script.push(...perChild)
  const model = new ScriptedModel(script)
  const done = bench.host.models.register(MODEL, model)
  return { model, done }
}

/**
 * Concurrent children's requests reach the one model in whatever order their runners send them,
 * and a script is read in that order: taken as it comes, one child's first request could get
 * another's last step, so a child ran the tool twice, or never, and the work per child (and how
 * evenly it spreads over runners) depended on the transport's timing. Each request gets the step
 * its own child is at instead: how many answers its conversation already holds.
 */
function ownStep(steps: readonly Step[]): ScriptEntry {
  return async (request) => {
    const answered = request.messages.reduce((n, message) => (message.role === 'assistant' ? n + 1 : n), 0)
    const step = steps[answered]
    if (step === undefined) throw new Error(`a bench child asked for model step ${answered + 1} of ${steps.length}`)
    if (Array.isArray(step)) return step
    await abortableSleep(step.delayMs, request.signal)
    return step.chunks
  }
}

let sequence = 0

export function start(bench: BenchHost, signal: AbortSignal = new AbortController().signal): Promise<SubagentRun> {
  return bench.host.spawn.start({ prompt: `bench task ${++sequence}`, parent: bench.parent, signal })
}

export function expectStop(result: SubagentResult, expected: SubagentResult['stopReason'], mode: Mode): SubagentResult {
  if (result.stopReason !== expected) {
    throw new Error(`a ${mode} bench child ended ${result.stopReason}, not ${expected}${result.diagnostic ? `: ${result.diagnostic}` : ''}`)
  }
  return result
}

/** One whole delegation; resolves with its result once disposed. */
export async function delegate(bench: BenchHost): Promise<SubagentResult> {
  const run = await start(bench)
  try {
    return expectStop(await run.result, 'completed', bench.mode)
  } finally {
    await run.dispose()
  }
}

/** Runs `total` delegations with at most `inFlight` at once; calls `onDone` with each one's latency. */
export async function saturate(total: number, inFlight: number, one: () => Promise<unknown>, onDone?: (latencyMs: number) => void): Promise<void> {
  let next = 0
  const lane = async () => {
    while (next < total) {
      next++
      const t0 = performance.now()
      await one()
      onDone?.(performance.now() - t0)
    }
  }
  await Promise.all(Array.from({ length: Math.min(inFlight, total) }, lane))
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
