/**
 * The bench command's smoke test. Goals are never asserted (timings are noisy on a shared
 * machine); what is checked is that a run completes and its JSON has every figure a reader or
 * a script relies on, and that a bad command line fails fast with exit 2.
 */
import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, expect, it } from 'vitest'

const MAIN = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url))
const run = promisify(execFile)
let dir: string

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'subagent-bench-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

const summary = {
  n: expect.any(Number),
  median: expect.any(Number),
  p99: expect.any(Number),
  min: expect.any(Number),
  max: expect.any(Number),
  mean: expect.any(Number),
  samples: expect.any(Array),
}

it('bench --quick --only S1 prints its table and writes a JSON file with every figure and the machine', async () => {
  const file = join(dir, 'bench.json')
  const svg = join(dir, 'bench.svg')
  const { stdout, stderr } = await run(process.execPath, [MAIN, 'bench', '--quick', '--only', 'S1', '--json', file, '--svg', svg], {
    timeout: 20_000,
    env: { ...process.env, NO_COLOR: '1' },
  })
  expect(stdout).toMatch(/^scenario\s+inline\s+worker\s+piscina floor\s+channel floor\s+ratio\s+goals \(worker\)\s+met\?$/m)
  expect(stdout).toMatch(/^S1\s+\d+\.\d+ ms \(p99 [\d.]+\)\s+\d+\.\d+ ms/m)
  expect(stderr).toBe('') // no progress bar when stderr is not a terminal

  const report = JSON.parse(await readFile(file, 'utf8'))
  expect(report.machine).toEqual(
    expect.objectContaining({ cores: expect.any(Number), cpuModel: expect.any(String), node: process.version }),
  )
  expect(report.scenarios).toHaveLength(1)
  const [s1] = report.scenarios
  expect(s1).toEqual(
    expect.objectContaining({
      id: 'S1',
      unit: 'ms',
      inline: expect.objectContaining(summary),
      worker: expect.objectContaining(summary),
      floor: expect.objectContaining(summary),
      channelFloor: expect.objectContaining(summary),
      ratio: expect.any(Number),
      goals: [{ text: 'p50 <= 0.5 ms', figure: expect.any(Number), threshold: 0.5, comparison: '<=', kind: 'value', met: expect.any(Boolean), line: 0.5 }],
      met: expect.any(Boolean),
    }),
  )
  expect(s1.worker.samples.length).toBe(s1.worker.n)
  expect(s1.worker.p99).toBeGreaterThanOrEqual(s1.worker.median)
  expect(s1.ratio).toBeCloseTo(s1.worker.median / s1.inline.median, 6)
  expect(s1.goals[0].figure).toBe(s1.worker.median)
  expect(s1.met).toBe(s1.worker.median <= 0.5)

  const chart = await readFile(svg, 'utf8')
  expect(chart).toMatch(/^<\?xml[^>]*>\s*<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/)
  expect(chart).toContain('>S1<')
}, 20_000)

// About 13 s: a batch streams for its ideal 2 s whatever its size, and the quick plan runs one
// warm-up (both hosts at once) and one round of four batches. The margin is for a loaded machine.
it('bench --quick --only S9 runs the streaming fan-in and reports both placements with every goal and secondary figure', async () => {
  const file = join(dir, 'stream.json')
  const { stdout } = await run(process.execPath, [MAIN, 'bench', '--quick', '--only', 'S9', '--json', file], {
    timeout: 60_000,
    env: { ...process.env, NO_COLOR: '1' },
  })
  // Both rows, each met? cell carrying its three goals' figures.
  expect(stdout).toMatch(/^S9\s+\d+ ms \(p99 \d+\)\s+\d+ ms .*(yes|NO) \([\d.]+×; [\d.]+ ms; [\d.]+×\)$/m)
  expect(stdout).toMatch(/^S9m\s+\d+ ms \(p99 \d+\)\s+\d+ ms .*(yes|NO) \([\d.]+×; [\d.]+ ms; [\d.]+×\)$/m)
  expect(stdout).toMatch(/CPU per chunk \(whole process\): inline [\d.]+ µs, worker [\d.]+ µs/)
  expect(stdout).toMatch(/Host event-loop delay p99 \/ max: inline [\d.]+ \/ [\d.]+ ms, worker [\d.]+ \/ [\d.]+ ms/)

  const report = JSON.parse(await readFile(file, 'utf8'))
  expect(report.scenarios.map((s: { id: string }) => s.id)).toEqual(['S9', 'S9m'])
  const byVariant = { inline: expect.objectContaining(summary), worker: expect.objectContaining(summary) }
  const goal = { text: expect.any(String), figure: expect.any(Number), threshold: expect.any(Number), comparison: '<=', kind: expect.any(String), met: expect.any(Boolean) }
  for (const row of report.scenarios) {
    expect(row).toEqual(
      expect.objectContaining({
        unit: 'ms',
        inline: expect.objectContaining(summary),
        worker: expect.objectContaining(summary),
        reference: { label: 'ideal', value: 2000 },
        setup: expect.objectContaining({ children: expect.any(Number), chunksPerChild: 100, intervalMs: 20, pool: expect.objectContaining({ minThreads: 3, maxThreads: 3 }) }),
        goals: [expect.objectContaining(goal), expect.objectContaining(goal), expect.objectContaining(goal)],
        met: expect.any(Boolean),
        extra: expect.objectContaining({
          wallOverIdeal: { inline: expect.any(Number), worker: expect.any(Number) },
          cpuUsPerChunk: byVariant,
          eventLoopDelayMs: { p99: byVariant, max: byVariant },
        }),
      }),
    )
    const [wall, loop, cpu] = row.goals
    expect(wall.figure).toBeCloseTo(row.worker.median / 2000, 6)
    expect(loop.figure).toBe(row.extra.eventLoopDelayMs.p99.worker.median)
    expect(cpu.figure).toBeCloseTo(row.extra.cpuUsPerChunk.worker.median / row.extra.cpuUsPerChunk.inline.median, 6)
    expect(row.met).toBe(row.goals.every((g: { met: boolean }) => g.met))
  }
}, 60_000)

it('an unknown flag or scenario exits 2 with a clear message and runs nothing', async () => {
  for (const [args, message] of [
    [['--fast'], /unknown flag --fast/],
    [['--only', 'S1,S10'], /unknown scenario "S10" in --only/],
    [['--json'], /--json needs a value/],
  ] as const) {
    const failure = await run(process.execPath, [MAIN, 'bench', ...args], { timeout: 10_000 }).then(
      () => undefined,
      (error: { code?: number; stderr?: string; stdout?: string }) => error,
    )
    expect(failure?.code).toBe(2)
    expect(failure?.stderr).toMatch(message)
    expect(failure?.stdout).toBe('')
  }
}, 60_000)
