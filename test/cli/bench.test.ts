/**
 * The bench command's smoke test. Goals are never asserted (timings are noisy on a shared
 * machine); what is checked is that a run completes, prints every transport's column and every
 * goal with its transport, and that its JSON has every figure a reader or a script relies on, and
 * that a bad command line fails fast with exit 2. The runs go side by side: each is a child
 * process of its own, and the S9 one spends most of its time waiting on paced streams. The
 * remote column (BullMQ worker nodes on Redis) is checked on S2 alone, when a Redis answers; the
 * other runs leave it out with --no-remote, which is how they check that it is left out.
 *
 * Each run covers only the scenarios its assertions read, with --smoke (the least plan that
 * computes every figure), but for S11, whose kills need --quick's longer round. Its bounds are generous (a bench run
 * is CPU-bound, and a loaded two-core machine makes it several times slower); the process's own
 * timeout comes first, so a failure shows what it printed.
 */
import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { REDIS_URL, redisReachable } from '../support/redis.js'

const MAIN = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url))
const run = promisify(execFile)
/** How long one bench run may take: the three go side by side, and on a heavily loaded machine S2 alone took 184 s. Its test a little longer. */
const RUN_MS = 400_000
const TEST_MS = RUN_MS + 20_000
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

/** A table cell: `median (p99 x)` in ms. */
const MS = String.raw`\d+(?:\.\d+)? ms \(p99 [\d.]+\)`

/** Whether a process is still there (signal 0 only asks). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as { code?: string }).code === 'EPERM'
  }
}

describe.concurrent('bench runs', () => {
  it('bench --smoke --only S1,S8,S10 --no-remote prints every local transport side by side, each goal on its transport, no remote column, and writes the JSON and the chart', async () => {
    const file = join(dir, 'bench.json')
    const svg = join(dir, 'bench.svg')
    const { stdout, stderr } = await run(process.execPath, [MAIN, 'bench', '--smoke', '--only', 'S1,S8,S10', '--no-remote', '--json', file, '--svg', svg], {
      // About 30 s beside the other runs on two quiet cores.
      timeout: RUN_MS,
      env: { ...process.env, NO_COLOR: '1' },
    })
    expect(stdout).toMatch(/^scenario\s+inline\s+worker\s+process\s+piscina floor\s+channel floor\s+worker\/inline\s+process\/worker$/m)
    expect(stdout).toMatch(new RegExp(String.raw`^S1\s+${MS}\s+${MS}\s+${MS}\s+${MS}\s+${MS}\s+[\d.]+×\s+[\d.]+×$`, 'm'))
    expect(stdout).toMatch(new RegExp(String.raw`^S8\s+n/a\s+${MS}\s+${MS}\s+-\s+[\d.]+×$`, 'm'))
    expect(stdout).toMatch(new RegExp(String.raw`^S10\s+${MS}\s+${MS}\s+${MS}\s+[\d.]+×\s+[\d.]+×$`, 'm'))
    // The goals table: one line per goal, the transport it is judged on named.
    expect(stdout).toMatch(/^scenario\s+transport\s+goal\s+figure\s+met\?$/m)
    expect(stdout).toMatch(/^S1\s+worker\s+p50 <= 0\.5 ms\s+[\d.]+ ms\s+(yes|NO)$/m)
    expect(stdout).toMatch(/^S8\s+worker\s+<= abortGraceMs \+ 50 ms \(250 ms\)\s+[\d.]+ ms\s+(yes|NO)$/m)
    expect(stdout).toMatch(/^S8\s+process\s+<= abortGraceMs \+ 50 ms \(250 ms\)\s+[\d.]+ ms\s+(yes|NO)$/m)
    expect(stdout).not.toMatch(/^S10\s+(worker|process)\s/m) // S10 reports, with no goal
    expect(stdout).toMatch(/S10 {2}cold start: .* Reported, no goal\./)
    expect(stderr).toBe('') // no progress bar when stderr is not a terminal
    // --no-remote: no remote column, floor or ratio, and no remote goal.
    expect(stdout).not.toMatch(/remote\/worker|bullmq floor|^S\d+\s+remote\s/m)

    const report = JSON.parse(await readFile(file, 'utf8'))
    expect(report.machine).toEqual(expect.objectContaining({ cores: expect.any(Number), cpuModel: expect.any(String), node: process.version }))
    expect(report.remote).toEqual({ measured: false, reason: expect.stringMatching(/--no-remote/) })
    expect(report.scenarios.map((s: { id: string }) => s.id)).toEqual(['S1', 'S8', 'S10'])
    for (const row of report.scenarios) {
      expect(row).not.toHaveProperty('remote')
      expect(row).not.toHaveProperty('bullmqFloor')
      expect(row).not.toHaveProperty('remoteRatio')
    }
    const [s1, s8, s10] = report.scenarios
    expect(s1).toEqual(
      expect.objectContaining({
        id: 'S1',
        unit: 'ms',
        inline: expect.objectContaining(summary),
        worker: expect.objectContaining(summary),
        process: expect.objectContaining(summary),
        floor: expect.objectContaining(summary),
        channelFloor: expect.objectContaining(summary),
        ratio: expect.any(Number),
        processRatio: { inline: expect.any(Number), worker: expect.any(Number) },
        goals: [{ mode: 'worker', text: 'p50 <= 0.5 ms', figure: expect.any(Number), threshold: 0.5, comparison: '<=', kind: 'value', met: expect.any(Boolean), line: 0.5 }],
        met: expect.any(Boolean),
      }),
    )
    for (const mode of ['worker', 'process']) expect(s1[mode].samples.length).toBe(s1[mode].n)
    expect(s1.process.p99).toBeGreaterThanOrEqual(s1.process.median)
    expect(s1.ratio).toBeCloseTo(s1.worker.median / s1.inline.median, 6)
    expect(s1.processRatio.inline).toBeCloseTo(s1.process.median / s1.inline.median, 6)
    expect(s1.processRatio.worker).toBeCloseTo(s1.process.median / s1.worker.median, 6)
    expect(s1.goals[0].figure).toBe(s1.worker.median)
    expect(s1.met).toBe(s1.worker.median <= 0.5)

    // S8: the same goal form on both transports; inline cannot run it, and says why.
    expect(s8.inline).toBeNull()
    expect(s8.notApplicable.inline).toMatch(/holds the host's own thread/)
    expect(s8.goals.map((g: { mode: string; figure: number; threshold: number }) => [g.mode, g.figure, g.threshold])).toEqual([
      ['worker', s8.worker.median, 250],
      ['process', s8.process.median, 250],
    ])
    // S10: every transport's cold start, no goal.
    expect(s10).toEqual(
      expect.objectContaining({
        unit: 'ms',
        inline: expect.objectContaining(summary),
        worker: expect.objectContaining(summary),
        process: expect.objectContaining(summary),
        goals: [],
        met: true,
      }),
    )

    const chart = await readFile(svg, 'utf8')
    expect(chart).toMatch(/^<\?xml[^>]*>\s*<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/)
    for (const id of ['S1', 'S8', 'S10']) expect(chart).toContain(`>${id}<`)
    expect(chart).toContain('>process<') // a bar per row, and the legend
    expect(chart).toContain('goal (process): &lt;= abortGraceMs + 50 ms (250 ms)')
    expect(chart).toContain('>no goal<')
    expect(chart).not.toContain('>remote<')
  }, TEST_MS)

  it('bench --smoke --only S2 puts the remote column beside the others when Redis answers: two worker nodes, the BullMQ floor and the remote goal, and nothing left behind', async (ctx) => {
    if (!(await redisReachable())) ctx.skip(`no Redis at ${REDIS_URL}: the bench's remote column is not checked (start one, or point REDIS_URL at one)`)
    const file = join(dir, 'remote.json')
    const svg = join(dir, 'remote.svg')
    const { stdout, stderr } = await run(process.execPath, [MAIN, 'bench', '--smoke', '--only', 'S2', '--redis', REDIS_URL, '--json', file, '--svg', svg], {
      timeout: RUN_MS,
      env: { ...process.env, NO_COLOR: '1' },
    })
    expect(stderr).toBe('')
    expect(stdout).toMatch(/^scenario\s+inline\s+worker\s+process\s+remote\s+piscina floor\s+channel floor\s+bullmq floor\s+worker\/inline\s+process\/worker\s+remote\/worker$/m)
    // Four transports, three floors, three ratios.
    expect(stdout).toMatch(new RegExp(String.raw`^S2(\s+${MS}){7}(\s+[\d.]+×){3}$`, 'm'))
    expect(stdout).toMatch(/^S2\s+remote\s+p50 overhead over worker <= 2 ms\s+-?[\d.]+ ms\s+(yes|NO)$/m)
    expect(stdout).toMatch(/remote = the BullMQ transport: 2 worker node processes/)

    const report = JSON.parse(await readFile(file, 'utf8'))
    // S2 alone: one pair of nodes, started for it.
    const node = { id: expect.any(String), pid: expect.any(Number), maxThreads: expect.any(Number), childrenPerWorker: expect.any(Number) }
    expect(report.remote).toEqual({
      measured: true,
      redis: expect.any(String),
      queue: expect.stringMatching(/^bench-\d+-[0-9a-f]+$/),
      redisPid: report.remote.redisPid === null ? null : expect.any(Number),
      nodes: [node, node],
    })
    expect(report.scenarios.map((s: { id: string }) => s.id)).toEqual(['S2'])
    const [s2] = report.scenarios
    expect(s2).toEqual(
      expect.objectContaining({
        inline: expect.objectContaining(summary),
        worker: expect.objectContaining(summary),
        process: expect.objectContaining(summary),
        remote: expect.objectContaining(summary),
        bullmqFloor: expect.objectContaining(summary),
        remoteRatio: { worker: expect.any(Number), floor: expect.any(Number) },
        setup: expect.objectContaining({
          remote: {
            nodes: report.remote.nodes.map(({ id, pid }: { id: string; pid: number }) => ({ id, pid })),
            perNode: { maxThreads: report.remote.nodes[0].maxThreads, childrenPerWorker: report.remote.nodes[0].childrenPerWorker },
            queue: report.remote.queue,
            redis: report.remote.redis,
          },
        }),
      }),
    )
    expect(s2.remote.samples.length).toBe(s2.remote.n)
    expect(s2.remoteRatio.worker).toBeCloseTo(s2.remote.median / s2.worker.median, 6)
    expect(s2.remoteRatio.floor).toBeCloseTo(s2.remote.median / s2.bullmqFloor.median, 6)
    const goal = s2.goals.find((g: { mode: string }) => g.mode === 'remote')
    expect(goal).toEqual({ mode: 'remote', text: 'p50 overhead over worker <= 2 ms', figure: expect.any(Number), threshold: 2, comparison: '<=', kind: 'value', met: expect.any(Boolean), line: expect.any(Number) })
    expect(goal.figure).toBeCloseTo(s2.remote.median - s2.worker.median, 6)
    expect(goal.met).toBe(goal.figure <= 2)
    expect(s2.met).toBe(s2.goals.every((g: { met: boolean }) => g.met))

    // The nodes were stopped and this run's queues removed from Redis.
    for (const { pid } of report.remote.nodes) expect(alive(pid)).toBe(false)
    const redis = new Redis(REDIS_URL)
    try {
      expect(await redis.keys(`bull:${report.remote.queue}*`)).toEqual([])
    } finally {
      redis.disconnect()
    }

    const chart = await readFile(svg, 'utf8')
    expect(chart).toContain('>remote<')
    expect(chart).toContain('>bullmq floor<')
    expect(chart).toContain('goal (remote): p50 overhead over worker &lt;= 2 ms')
  }, TEST_MS)

  it('bench --smoke --only G2,O3 runs the A/B rows: the worker with the feature on against off, the on/off ratio, and the governance goal', async () => {
    const file = join(dir, 'ab.json')
    const { stdout } = await run(process.execPath, [MAIN, 'bench', '--smoke', '--only', 'G2,O3', '--no-remote', '--json', file], {
      timeout: RUN_MS,
      env: { ...process.env, NO_COLOR: '1' },
    })
    expect(stdout).toMatch(/\son\/off$/m)
    expect(stdout).toMatch(new RegExp(String.raw`^G2\s+n/a\s+${MS}\s+n/a\s+-\s+-\s+[\d.]+×$`, 'm'))
    expect(stdout).toMatch(/^O3\s+n\/a\s+[\d,]+\/s \(p99 [\d,]+\)\s+n\/a\s+-\s+-\s+[\d.]+×$/m)
    expect(stdout).toMatch(/^G2\s+worker\s+p50 with limits <= 1\.05 × without\s+[\d.]+×\s+(yes|NO)$/m)
    expect(stdout).toMatch(/O3 .* Off: neither, [\d,]+\/s .*On\/off [\d.]+×; host CPU per unit of work on\/off [\d.]+×\. Reported, no goal\./)
    const report = JSON.parse(await readFile(file, 'utf8'))
    expect(report.scenarios.map((s: { id: string }) => s.id)).toEqual(['G2', 'O3'])
    const o3 = report.scenarios[1]
    expect(o3.ab.ratio).toBeCloseTo(o3.worker.median / o3.ab.offFigure.median, 6)
    // The traced arm made spans and the subscriber heard every channel message.
    expect(o3.extra.spansExported).toBeGreaterThan(0)
    expect(o3.extra.messagesHeard).toBeGreaterThan(0)
  }, TEST_MS)

  // A round kills a thread once every slot has held a child that asked its model, then at most
  // every 250 ms while the pool is whole and every slot is taken (scenarios/moves.ts). No child
  // runs module code (a host model, a host tool, no hooks): each is waiting on the host, between
  // steps, or being built (a build lost with its thread is tried again), so every child completes
  // and the killed threads' children move. About 2 s on a quiet machine.
  it('bench --quick --only S11 kills worker threads under load: every child completes, the moved ones give the latency a move adds', async () => {
    const file = join(dir, 'moves.json')
    const { stdout } = await run(process.execPath, [MAIN, 'bench', '--quick', '--only', 'S11', '--no-remote', '--json', file], {
      timeout: RUN_MS,
      env: { ...process.env, NO_COLOR: '1' },
    })
    expect(stdout).toMatch(/^S11\s+n\/a\s+-?[\d.,]+ ms \(p99 -?[\d.,]+\)\s+n\/a/m)
    expect(stdout).toMatch(/^S11\s+worker\s+every child completes \(each waits on the host or is between steps\)\s+1\.00×\s+yes$/m)
    const report = JSON.parse(await readFile(file, 'utf8'))
    const [row] = report.scenarios
    expect(row.id).toBe('S11')
    expect(row.process).toBeNull()
    // Why any child did not complete is in `errors` (its stop reason, moves and diagnostic).
    expect(row.extra.errors).toEqual([])
    expect(row.extra).toMatchObject({ children: 100, completed: 100, completedFraction: 1 })
    expect(row.goals[0]).toMatchObject({ figure: 1, met: true })
    expect(row.extra.kills).toBeGreaterThanOrEqual(1)
    expect(row.extra.moved).toBeGreaterThanOrEqual(1)
    // One sample per moved child that completed.
    expect(row.worker.n).toBe(row.extra.moved)
  }, TEST_MS)

  it('bench --smoke --only S5,S6 --no-remote takes S5 batch by batch with the bare floor, and S6 in rounds of its own', async () => {
    const file = join(dir, 'cpu.json')
    const { stdout } = await run(process.execPath, [MAIN, 'bench', '--smoke', '--only', 'S5,S6', '--no-remote', '--json', file], {
      timeout: RUN_MS,
      env: { ...process.env, NO_COLOR: '1' },
    })
    // Every local transport and the floor side by side.
    expect(stdout).toMatch(new RegExp(String.raw`^S5\s+${MS}\s+${MS}\s+${MS}\s+${MS}\s+[\d.]+×\s+[\d.]+×$`, 'm'))
    expect(stdout).toMatch(/^S5\s+worker\s+wall <= 1\.05 × floor\s+[\d.]+×\s+(yes|NO)$/m)
    expect(stdout).toMatch(/^S6\s+worker\s+p99 <= 10 ms\s+[\d.]+ ms\s+(yes|NO)$/m)

    const report = JSON.parse(await readFile(file, 'utf8'))
    const [s5, s6] = report.scenarios
    expect([s5.id, s6.id]).toEqual(['S5', 'S6'])
    expect(s5.setup).toEqual(expect.objectContaining({ warmup: 4, children: 2, rounds: 2, steps: 2 }))
    // One floor batch a round, taken in turn with the transports' batches.
    for (const side of ['inline', 'worker', 'process', 'floor']) {
      expect(s5[side]).toEqual(expect.objectContaining(summary))
      expect(s5[side].samples).toHaveLength(2)
    }
    expect(s5.goals[0].figure).toBeCloseTo(s5.worker.median / s5.floor.median, 6)
    // S6: each round's own p99 stands in for the samples the histogram does not keep.
    for (const mode of ['inline', 'worker', 'process']) expect(s6[mode].samples).toHaveLength(2)
    expect(s6.goals[0]).toEqual(expect.objectContaining({ mode: 'worker', figure: s6.worker.p99, threshold: 10 }))
  }, TEST_MS)

  // About 3 s: a batch streams for its ideal 200 ms whatever its size (the smoke plan's 10 chunks
  // at 20 ms), and the plan runs one warm-up (every host at once) and one round of six batches.
  // The margin is for a loaded machine. S9u is the same run with the user-written model
  // (src/cli/bench/user-model.ts) in place of the ScriptedModel: its rows have the same shape.
  it.each([
    { only: 'S9', ids: ['S9', 'S9m'], model: /ScriptedModel/ },
    { only: 'S9u', ids: ['S9u', 'S9um'], model: /user-written async generator/ },
  ])('bench --smoke --only $only runs the streaming fan-in and reports both placements on every transport with every goal and secondary figure', async ({ only, ids, model }) => {
    const file = join(dir, `stream-${only}.json`)
    const { stdout } = await run(process.execPath, [MAIN, 'bench', '--smoke', '--only', only, '--no-remote', '--json', file], {
      timeout: RUN_MS,
      env: { ...process.env, NO_COLOR: '1' },
    })
    for (const id of ids) {
      // Both rows, every transport's wall time.
      expect(stdout).toMatch(new RegExp(String.raw`^${id}\s+\d+ ms \(p99 \d+\)\s+\d+ ms \(p99 \d+\)\s+\d+ ms \(p99 \d+\)\s+[\d.]+×\s+[\d.]+×$`, 'm'))
      // Each row's three goals, judged on the worker.
      expect(stdout).toMatch(new RegExp(String.raw`^${id}\s+worker\s+wall <= [\d.]+ × ideal\s+[\d.]+×\s+(yes|NO)$`, 'm'))
      expect(stdout).toMatch(new RegExp(String.raw`^${id}\s+worker\s+event-loop p99 <= \d+ ms\s+[\d.]+ ms\s+(yes|NO)$`, 'm'))
      expect(stdout).toMatch(new RegExp(String.raw`^${id}\s+worker\s+CPU/chunk <= 1\.5 × inline\s+[\d.]+×\s+(yes|NO)$`, 'm'))
    }
    expect(stdout).toMatch(/CPU per chunk \(host and runner processes\): inline [\d.]+ µs, worker [\d.]+ µs, process [\d.]+ µs/)
    expect(stdout).toMatch(/Host event-loop delay p99 \/ max: inline [\d.]+ \/ [\d.]+ ms, worker [\d.]+ \/ [\d.]+ ms, process [\d.]+ \/ [\d.]+ ms/)

    const report = JSON.parse(await readFile(file, 'utf8'))
    expect(report.scenarios.map((s: { id: string }) => s.id)).toEqual(ids)
    const byVariant = { inline: expect.objectContaining(summary), worker: expect.objectContaining(summary), process: expect.objectContaining(summary) }
    const goal = { mode: 'worker', text: expect.any(String), figure: expect.any(Number), threshold: expect.any(Number), comparison: '<=', kind: expect.any(String), met: expect.any(Boolean) }
    for (const row of report.scenarios) {
      expect(row).toEqual(
        expect.objectContaining({
          unit: 'ms',
          // The model the row streams with: each scenario's own, in both placements.
          model: expect.stringMatching(model),
          inline: expect.objectContaining(summary),
          worker: expect.objectContaining(summary),
          process: expect.objectContaining(summary),
          processRatio: { inline: expect.any(Number), worker: expect.any(Number) },
          reference: { label: 'ideal', value: 200 },
          setup: expect.objectContaining({ children: expect.any(Number), chunksPerChild: 10, intervalMs: 20, pool: expect.objectContaining({ minThreads: 3, maxThreads: 3 }) }),
          goals: [expect.objectContaining(goal), expect.objectContaining(goal), expect.objectContaining(goal)],
          met: expect.any(Boolean),
          extra: expect.objectContaining({
            wallOverIdeal: { inline: expect.any(Number), worker: expect.any(Number), process: expect.any(Number) },
            cpuUsPerChunk: byVariant,
            eventLoopDelayMs: { p99: byVariant, max: byVariant },
          }),
        }),
      )
      const [wall, loop, cpu] = row.goals
      expect(wall.figure).toBeCloseTo(row.worker.median / 200, 6)
      expect(loop.figure).toBe(row.extra.eventLoopDelayMs.p99.worker.median)
      expect(cpu.figure).toBeCloseTo(row.extra.cpuUsPerChunk.worker.median / row.extra.cpuUsPerChunk.inline.median, 6)
      expect(row.met).toBe(row.goals.every((g: { met: boolean }) => g.met))
    }
  }, TEST_MS)
})

it('an unknown flag or scenario exits 2 with a clear message and runs nothing', async () => {
  for (const [args, message] of [
    [['--fast'], /unknown flag --fast/],
    [['--only', 'S1,S12'], /unknown scenario "S12" in --only/],
    [['--json'], /--json needs a value/],
    [['--quick', '--smoke'], /--quick and --smoke are two plans: give one/],
  ] as const) {
    const failure = await run(process.execPath, [MAIN, 'bench', ...args], { timeout: 30_000 }).then(
      () => undefined,
      (error: { code?: number; stderr?: string; stdout?: string }) => error,
    )
    expect(failure?.code).toBe(2)
    expect(failure?.stderr).toMatch(message)
    expect(failure?.stdout).toBe('')
  }
}, 100_000)
