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
  expect(stdout).toMatch(/^scenario\s+inline\s+worker\s+floor\s+ratio\s+goal \(worker\)\s+met\?$/m)
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
      ratio: expect.any(Number),
      goal: expect.objectContaining({ text: 'p50 <= 0.5 ms', figure: expect.any(Number), threshold: 0.5 }),
      met: expect.any(Boolean),
    }),
  )
  expect(s1.worker.samples.length).toBe(s1.worker.n)
  expect(s1.worker.p99).toBeGreaterThanOrEqual(s1.worker.median)
  expect(s1.ratio).toBeCloseTo(s1.worker.median / s1.inline.median, 6)
  expect(s1.met).toBe(s1.worker.median <= 0.5)

  const chart = await readFile(svg, 'utf8')
  expect(chart).toMatch(/^<\?xml[^>]*>\s*<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/)
  expect(chart).toContain('>S1<')
}, 20_000)

it('an unknown flag or scenario exits 2 with a clear message and runs nothing', async () => {
  for (const [args, message] of [
    [['--fast'], /unknown flag --fast/],
    [['--only', 'S1,S9'], /unknown scenario "S9" in --only/],
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
})
