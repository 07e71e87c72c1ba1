/**
 * `subagent-worker bench`: runs the selected scenarios inline, on worker threads and in child
 * processes in one process run, prints the tables on stdout and, on request, writes the JSON and
 * the SVG chart.
 */
import { spawn } from 'node:child_process'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { dirname, resolve } from 'node:path'
import { styleFor } from '../format.js'
import { BENCH_USAGE, parseBenchArgs, type BenchArgs } from './args.js'
import { createChannelFloor } from './channel-floor.js'
import { createFloor } from './floor.js'
import { defaultThreads } from './harness.js'
import { backgroundBusy, machineInfo, otherLoad } from './machine.js'
import { FULL_PLAN, QUICK_PLAN } from './plan.js'
import { createProgress } from './progress.js'
import { renderGoals, renderNotes, renderTable } from './report.js'
import { scenariosFor } from './scenarios/index.js'
import { renderSvg } from './svg.js'
import type { BenchReport, ScenarioResult } from './types.js'

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
  const plan = args.quick ? QUICK_PLAN : FULL_PLAN
  const machine = machineInfo(await backgroundBusy())
  const scenarios = scenariosFor(args.only)
  // Two floors (bare piscina tasks, a bare channel per thread), each measured once for S1/S2 and once for S3.
  const floorUnits = 2 * ((args.only.some((id) => id === 'S1' || id === 'S2') ? 1 : 0) + (args.only.includes('S3') ? 1 : 0))
  const progress = await createProgress(scenarios.reduce((sum, s) => sum + s.units(plan), floorUnits))
  const context = { plan, progress, floor: createFloor(plan, defaultThreads(), progress), channelFloor: createChannelFloor(plan, defaultThreads(), progress) }
  const startedAt = new Date()
  const others = otherLoad()
  const t0 = performance.now()
  const results: ScenarioResult[] = []
  try {
    for (const scenario of scenarios) {
      progress.phase(scenario.label)
      for (const result of await scenario.run(context)) {
        if (args.only.includes(result.id)) results.push(result)
      }
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
    quick: args.quick,
    machine,
    scenarios: results,
  }
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
