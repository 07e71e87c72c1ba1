/**
 * `subagent-worker bench`: runs the selected scenarios inline, on worker threads, in child
 * processes and (where it applies, when Redis is there) on BullMQ worker nodes in one process
 * run, prints the tables on stdout and, on request, writes the JSON and the SVG chart.
 */
import { spawn } from 'node:child_process'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { dirname, resolve } from 'node:path'
import { styleFor } from '../terminal/format.js'
import { BENCH_USAGE, parseBenchArgs, type BenchArgs } from './args.js'
import { createBullmqFloor } from './floors/bullmq-floor.js'
import { createChannelFloor } from './floors/channel-floor.js'
import { createFloor } from './floors/floor.js'
import { defaultThreads } from './harness.js'
import { backgroundBusy, machineInfo, otherLoad } from './measure/machine.js'
import { PLANS } from './plan.js'
import { createProgress } from './report/progress.js'
import { startRemote, type RemoteRig } from './remote.js'
import { renderGoals, renderNotes, renderTable } from './report/report.js'
import { scenariosFor } from './scenarios/index.js'
import type { Scenario, ScenarioContext } from './scenarios/scenario.js'
import { renderSvg } from './report/svg.js'
import { REMOTE_IDS, type BenchReport, type RemoteInfo, type ScenarioResult } from './types.js'

/** Set on the re-executed child so it never re-executes again. */
const REEXEC_MARK = 'SUBAGENT_WORKER_BENCH_GC'

export async function runBench(argv: readonly string[]): Promise<void> {
  const args = parseBenchArgs(argv)
  if (args.help) {
    process.stdout.write(BENCH_USAGE)
    return
  }
  // S7 reads memory after a forced collection; without --expose-gc garbage would count as cost.
  if (args.only.includes('S7') && typeof globalThis.gc !== 'function' && process.env[REEXEC_MARK] === undefined) {
    process.exitCode = await reexecWithGc()
    return
  }
  const report = await measure(args, argv)
  const style = styleFor(process.stdout)
  process.stdout.write(`${renderTable(report, style)}\n\n${renderGoals(report, style)}\n\n${renderNotes(report, style)}\n`)
  if (args.json) await writeOut(args.json, `${JSON.stringify(report, null, 2)}\n`)
  if (args.svg) await writeOut(args.svg, renderSvg(report))
}

async function measure(args: BenchArgs, argv: readonly string[]): Promise<BenchReport> {
  const plan = PLANS[args.plan]
  const machine = machineInfo(await backgroundBusy())
  const scenarios = scenariosFor(args.only)
  const wantsRemote = args.only.some((id) => REMOTE_IDS.includes(id))
  // Redis is pinged before the clock and the load meter; each scenario starts the nodes it runs on.
  const remote = wantsRemote ? await remoteColumn(args) : undefined
  const rig = typeof remote === 'object' ? remote : undefined
  try {
    // Two floors (bare piscina tasks, a bare channel per thread), each measured once for S1/S2 and
    // once for S3, and with the remote column a third (a bare BullMQ job round trip).
    const floorUnits = (rig ? 3 : 2) * ((args.only.some((id) => id === 'S1' || id === 'S2') ? 1 : 0) + (args.only.includes('S3') ? 1 : 0))
    const units = scenarios.reduce((sum, s) => sum + s.units(plan) + (rig ? (s.remoteUnits?.(plan) ?? 0) : 0), floorUnits)
    const progress = await createProgress(units)
    const context: ScenarioContext = {
      plan,
      progress,
      floor: createFloor(plan, defaultThreads(), progress),
      channelFloor: createChannelFloor(plan, defaultThreads(), progress),
      ...(rig ? { remote: { rig, floor: createBullmqFloor(plan, rig, progress) } } : {}),
    }
    const startedAt = new Date()
    const others = otherLoad()
    const t0 = performance.now()
    const results: ScenarioResult[] = []
    try {
      for (const [i, scenario] of scenarios.entries()) {
        progress.phase(scenario.label)
        for (const result of await scenario.run(context)) {
          if (args.only.includes(result.id)) results.push(rig ? withRemoteCell(result) : result)
        }
        // The nodes stay up only for a next scenario that runs on them (it keeps them if it wants the same pool).
        const next = scenarios[i + 1]
        if (rig && !(next && usesRemote(next))) await rig.release()
      }
    } finally {
      progress.stop()
    }
    machine.otherLoadDuringRun = others.stop()
    return {
      tool: 'subagent-worker bench',
      version: await packageVersion(),
      startedAt: startedAt.toISOString(),
      durationMs: performance.now() - t0,
      argv: [...argv],
      plan: args.plan,
      machine,
      ...(remote === undefined ? {} : { remote: remoteInfo(remote) }),
      scenarios: results,
    }
  } finally {
    await rig?.stop()
  }
}

/**
 * The remote column's nodes, started; or why the run has none: --no-remote, or (said on stderr,
 * since the user did not ask to go without it) no bullmq/ioredis or no Redis.
 */
async function remoteColumn(args: BenchArgs): Promise<RemoteRig | string> {
  if (!args.remote) return 'left out with --no-remote'
  const rig = await startRemote(args.redis)
  if (typeof rig === 'string') process.stderr.write(`${rig}: the remote column is skipped\n`)
  return rig
}

function remoteInfo(remote: RemoteRig | string): RemoteInfo {
  return typeof remote === 'string' ? { measured: false, reason: remote } : remote.info
}

const usesRemote = (scenario: Scenario) => scenario.ids.some((id) => REMOTE_IDS.includes(id))

/** A row the remote column does not cover gets an n/a cell in it, and says why. */
function withRemoteCell(result: ScenarioResult): ScenarioResult {
  if (result.remote !== undefined) return result
  const why = 'the remote column covers S1-S4, S8, S9, S9m, S9u and S9um (a BullMQ host and its nodes; not CPU, memory or cold-start figures yet)'
  return { ...result, remote: null, notApplicable: { ...result.notApplicable, remote: why } }
}

async function packageVersion(): Promise<string> {
  // dist/cli/bench/index.js → the package root.
  const text = await readFile(new URL('../../../package.json', import.meta.url), 'utf8')
  const { version } = JSON.parse(text) as { version?: unknown }
  return typeof version === 'string' ? version : 'unknown'
}

async function writeOut(file: string, text: string): Promise<void> {
  const path = resolve(file)
  await mkdir(dirname(path), { recursive: true })
  await writeFile(path, text)
}

/** Runs this same command again under `node --expose-gc`, passing the terminal through. */
function reexecWithGc(): Promise<number> {
  const script = process.argv[1]
  if (script === undefined) return Promise.reject(new Error('cannot re-execute the bench: the script path is unknown'))
  const child = spawn(process.execPath, ['--expose-gc', ...process.execArgv, script, ...process.argv.slice(2)], {
    stdio: 'inherit',
    env: { ...process.env, [REEXEC_MARK]: '1' },
  })
  return new Promise((resolveExit, reject) => {
    child.on('error', reject)
    child.on('exit', (code, signal) => resolveExit(code ?? (signal ? 1 : 0)))
  })
}
