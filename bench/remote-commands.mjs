#!/usr/bin/env node
/**
 * What one remote delegation asks of Redis: commands per delegation by command name, and pub/sub
 * messages (frames). It starts a Redis of its own on a free port (stopped by its pid at the end),
 * two worker nodes in this process (startNode, as `subagent-worker node` runs them) and one host
 * on the BullMQ transport, warms them up, then zeroes Redis's counters (`CONFIG RESETSTAT`), runs
 * N one-step delegations (a host ScriptedModel, S3's shape) and reads `INFO commandstats`.
 * Commands a Lua script runs are counted under their own names as well as the script's `evalsha`;
 * MONITOR splits them from the commands clients sent (each a round trip), and names each
 * `evalsha` by its BullMQ script. Counts barely
 * depend on the machine's load, unlike times: what does is the timer-driven part (heartbeat pings,
 * BullMQ's lock renewals and stall checks), which grows with a run's length, and how many fetch
 * attempts find the queue empty (both nodes wake for each job).
 *
 *   npm run build && node bench/remote-commands.mjs [--total 400] [--in-flight 16] [--cpu] [--json FILE]
 *
 * --cpu leaves MONITOR off (its feed costs Redis and this process CPU): commandstats only, and CPU
 * per delegation for this process (host and nodes) and the Redis server.
 */
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { createServer } from 'node:net'
import { parseArgs } from 'node:util'
import { Redis } from 'ioredis'
import { createHost, ScriptedModel, textResponse } from '../dist/index.js'
import { bullmqTransport, startNode } from '../dist/bullmq/index.js'

const { values } = parseArgs({
  options: { total: { type: 'string', default: '400' }, 'in-flight': { type: 'string', default: '16' }, cpu: { type: 'boolean', default: false }, json: { type: 'string' } },
})
const TOTAL = Number(values.total)
const IN_FLIGHT = Number(values['in-flight'])
const BENCH_MODULE = new URL('../dist/cli/bench/module.js', import.meta.url)
const QUEUE = 'commands'

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

/** A Redis of our own: nothing else's commands are counted. Resolves once it answers PING. */
async function startRedis(port) {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'inherit'] })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  // Whatever ends this process, its Redis goes with it.
  process.once('exit', () => child.kill('SIGTERM'))
  await new Promise((resolve, reject) => {
    let output = ''
    child.stdout.on('data', (chunk) => {
      output += chunk
      if (/Ready to accept connections/.test(output)) resolve()
    })
    child.once('exit', (code) => reject(new Error(`redis-server exited (${code}) before it was ready:\n${output}`)))
  })
  return {
    url: `redis://127.0.0.1:${port}`,
    pid: child.pid,
    async stop() {
      process.kill(child.pid, 'SIGTERM')
      await exited
    },
  }
}

/** A process's CPU time (utime + stime, every thread) in µs, from /proc. */
function cpuUs(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100
}

/** Redis's socket reads and writes (`INFO stats`): a pipeline is one read however many commands it carries. */
async function socketStats(admin) {
  const text = await admin.info('stats')
  const field = (name) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(text)?.[1] ?? NaN)
  return { reads: field('total_reads_processed'), writes: field('total_writes_processed') }
}

/** `INFO commandstats` as { command: calls }. */
async function commandStats(admin) {
  const text = await admin.info('commandstats')
  const calls = {}
  for (const match of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls[match[1]] = Number(match[2])
  return calls
}

/** BullMQ's Lua scripts by the SHA1 ioredis calls them by (its defineCommand hashes each script's text). */
async function scriptNames() {
  const dir = join(dirname(createRequire(import.meta.url).resolve('bullmq')), 'scripts')
  const names = new Map()
  for (const file of readdirSync(dir).filter((f) => /^[A-Za-z]+-\d+\.js$/.test(f))) {
    const { content, name } = Object.values(await import(join(dir, file))).find((value) => typeof value?.content === 'string')
    names.set(createHash('sha1').update(content).digest('hex'), name)
  }
  return names
}

/**
 * What MONITOR sees: each command a client sent (a round trip on its socket, named by its script
 * for an `evalsha`), apart from the ones Lua scripts ran inside Redis.
 */
async function watch(url) {
  const names = await scriptNames()
  const sent = {}
  const inScripts = {}
  const client = new Redis(url)
  const monitor = await client.monitor()
  monitor.on('monitor', (_time, args, source) => {
    let name = String(args[0]).toLowerCase()
    if (name === 'evalsha') name = `evalsha ${names.get(String(args[1])) ?? args[1]}`
    const counts = source === 'lua' ? inScripts : sent
    counts[name] = (counts[name] ?? 0) + 1
  })
  return {
    sent,
    inScripts,
    stop() {
      monitor.disconnect()
      client.disconnect()
    },
  }
}

/** A table of counts per delegation, largest first. */
function table(title, counts) {
  const rows = Object.entries(counts).sort(([, a], [, b]) => b - a)
  const sum = rows.reduce((n, [, c]) => n + c, 0)
  console.log(`\n| ${title} | per delegation |`)
  console.log('|---|---|')
  for (const [name, count] of rows) console.log(`| ${name} | ${(count / TOTAL).toFixed(2)} |`)
  console.log(`| **total** | **${(sum / TOTAL).toFixed(2)}** |`)
}

async function round(host, parent, total) {
  const model = new ScriptedModel(Array.from({ length: total }, () => textResponse('done')))
  const unregister = host.models.register('bench', model)
  let next = 0
  const lane = async () => {
    while (next++ < total) {
      const run = await host.spawn.start({ prompt: `count task ${next}`, parent })
      const result = await run.result
      await run.dispose()
      if (result.stopReason !== 'completed') throw new Error(`a child ended ${result.stopReason}: ${result.diagnostic}`)
    }
  }
  try {
    await Promise.all(Array.from({ length: IN_FLIGHT }, lane))
  } finally {
    unregister()
  }
}

const redis = await startRedis(await freePort())
const admin = new Redis(redis.url)
const nodes = []
let host
try {
  const pool = { minThreads: 1, maxThreads: 1, childrenPerWorker: IN_FLIGHT, idleTimeoutMs: 600_000 }
  for (let i = 0; i < 2; i++) nodes.push(await startNode({ connection: redis.url, queue: QUEUE, agentModules: [BENCH_MODULE], pool, name: `count-node-${i}` }))
  host = createHost({ transport: bullmqTransport({ connection: redis.url, queue: QUEUE, nodeSilenceMs: 30_000 }), agentModule: BENCH_MODULE })
  const parent = host.createAgent({ options: { provider: 'bench', model: 'scripted' } })
  await round(host, parent, Math.min(TOTAL, 100)) // links open, threads warm
  // MONITOR feeds every command back to us: it would weigh on the CPU figures.
  const seen = values.cpu ? { sent: {}, inScripts: {}, stop() {} } : await watch(redis.url)
  await admin.config('RESETSTAT')
  const started = performance.now()
  const cpu0 = { ours: cpuUs(process.pid), redis: cpuUs(redis.pid) }
  await round(host, parent, TOTAL)
  const cpu = { ours: (cpuUs(process.pid) - cpu0.ours) / TOTAL, redis: (cpuUs(redis.pid) - cpu0.redis) / TOTAL }
  const seconds = (performance.now() - started) / 1000
  const calls = await commandStats(admin)
  const sockets = await socketStats(admin)
  seen.stop()
  // Ours, not the delegations'.
  for (const counts of [calls, seen.sent]) for (const name of ['info', 'config|resetstat', 'config']) delete counts[name]
  console.log(`Redis per remote delegation: ${TOTAL} one-step delegations, ${IN_FLIGHT} in flight, 2 nodes in this process (${seconds.toFixed(1)} s)`)
  if (!values.cpu) table('command sent by a client (MONITOR)', seen.sent)
  if (!values.cpu) table('command run inside a script (MONITOR)', seen.inScripts)
  table('command, all (INFO commandstats)', calls)
  console.log(`\npub/sub messages (frames) per delegation: ${((calls.publish ?? 0) / TOTAL).toFixed(2)}`)
  // Writes include every pub/sub delivery (and MONITOR's feed, when it is on).
  console.log(`Redis socket reads per delegation: ${(sockets.reads / TOTAL).toFixed(2)} (writes ${(sockets.writes / TOTAL).toFixed(2)})`)
  // CPU moves with the machine's load: compare runs of one sitting only, and with --cpu (no MONITOR).
  console.log(`CPU per delegation: host and nodes ${cpu.ours.toFixed(0)} µs, Redis ${cpu.redis.toFixed(0)} µs${values.cpu ? '' : ' (MONITOR on: run with --cpu for CPU)'}`)
  if (values.json) writeFileSync(values.json, JSON.stringify({ total: TOTAL, inFlight: IN_FLIGHT, seconds, cpuUs: cpu, sockets, calls, sent: seen.sent, inScripts: seen.inScripts }, null, 2))
} finally {
  await host?.close()
  await Promise.all(nodes.map((node) => node.close(0)))
  admin.disconnect()
  await redis.stop()
}
