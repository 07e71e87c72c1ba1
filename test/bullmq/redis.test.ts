/**
 * Redis itself failing, on a redis-server of the test's own (never the shared one): a restart
 * mid-run ends the running children with an error naming Redis, a start while it is down fails
 * within redisTimeoutMs, and once it is back, delegation works again with nothing restarted. An
 * end whose channel's connection alone drops (cut at a proxy, its reconnection held) acts on no
 * job until it listens again. And credentials pass through: a password-protected Redis is reached
 * with the password, refused without it.
 */
import { spawnSync, type ChildProcess } from 'node:child_process'
import { connect } from 'node:net'
import { deserialize } from 'node:v8'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { createHost, ScriptedModel, textResponse, type Host, type ScriptEntry } from 'subagent-worker'
import { bullmqTransport, startNode, type RedisConnection, type WorkerNode } from 'subagent-worker/bullmq'
import { freePort, RedisProxy, startRedisServer } from '../support/redis.js'
import { eventOf } from '../support/driver-helpers.js'
import { Watch } from '../support/watch.js'

const CONTRACT_MODULE = fileURLToPath(new URL('../fixtures/contract-module.mjs', import.meta.url))
const HAVE_SERVER = spawnSync('redis-server', ['--version']).status === 0
if (!HAVE_SERVER && process.env.CI) throw new Error('CI is set, so the Redis fault tests must run, but redis-server is not on PATH (apt install redis-server)')

const servers: ChildProcess[] = []
const nodes: WorkerNode[] = []
const hosts: Host[] = []
const proxies: RedisProxy[] = []
const listeners: Redis[] = []
afterEach(async () => {
  for (const listener of listeners.splice(0)) listener.disconnect()
  for (const proxy of proxies) proxy.release()
  await Promise.all(hosts.splice(0).map((host) => host.close()))
  await Promise.all(nodes.splice(0).map((node) => node.close(0)))
  await Promise.all(proxies.splice(0).map((proxy) => proxy.close()))
  for (const server of servers.splice(0)) server.kill('SIGKILL')
})

/** A redis-server of this test's own on `port`, killed after the test; resolves once it accepts connections. */
const redisServer = (port: number, password?: string) => startRedisServer(port, (server) => servers.push(server), password)

async function stopServer(server: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => server.once('exit', resolve))
  server.kill('SIGKILL')
  await exited
}

/** What the host's Redis connections call themselves (CLIENT SETNAME), so the test can tell them from the node's. */
const HOST_NAME = 'test-host'

/**
 * Resolves once the host and the node are back on the restarted Redis at `port`: both the host's
 * connections (the publisher and the subscriber) named, and the host's channel and the node's
 * subscribed again (a node whose job comes back before its channel would miss the host's
 * answer to its take). MONITOR shows what comes after it starts; CLIENT LIST and PUBSUB, asked
 * after that, what came before.
 */
async function bothBack(port: number): Promise<void> {
  const named = new Set<string>()
  let monitoring = false
  let subscribed = false
  let nodeSubscribed = false
  const watch = new Watch()
  // MONITOR on a plain socket: +OK, then a line `+<time> [<db> <addr>] "<command>" "<arg>"...` for each command Redis runs.
  const monitor = connect(port, '127.0.0.1')
  monitor.setEncoding('utf8')
  let pending = ''
  monitor.on('data', (chunk: string) => {
    const lines = (pending + chunk).split('\r\n')
    pending = lines.pop()!
    for (const line of lines) {
      if (line === '+OK') monitoring = true
      const source = /^\+[\d.]+ \[\d+ (\S+)\]/.exec(line)?.[1]
      if (source && line.toLowerCase().includes(`"client" "setname" "${HOST_NAME}"`)) named.add(source)
      if (line.includes('"subscribe" "own:host:')) subscribed = true
      if (line.includes('"subscribe" "own:node:')) nodeSubscribed = true
    }
    watch.changed()
  })
  monitor.write('MONITOR\r\n')
  const admin = new Redis(port)
  try {
    await watch.until('MONITOR to start', () => monitoring)
    for (const line of String(await admin.client('LIST')).split('\n')) {
      const addr = /\baddr=(\S+)/.exec(line)?.[1]
      if (addr && line.includes(` name=${HOST_NAME} `)) named.add(addr)
    }
    if (((await admin.pubsub('CHANNELS', 'own:host:*')) as string[]).length > 0) subscribed = true
    if (((await admin.pubsub('CHANNELS', 'own:node:*')) as string[]).length > 0) nodeSubscribed = true
    await watch.until('the host and the node back on the restarted Redis', () => named.size >= 2 && subscribed && nodeSubscribed)
  } finally {
    monitor.destroy()
    admin.disconnect()
  }
}

/** Calls `heard` with each frame a node sends a host on the redis-server at `port`. */
async function onHostFrames(port: number, heard: (frame: Array<{ type?: unknown }>) => void): Promise<Redis> {
  const listener = new Redis(port)
  listener.on('pmessageBuffer', (_pattern: Buffer, _channel: Buffer, bytes: Buffer) => heard((deserialize(bytes) as [string, Array<{ type?: unknown }>])[1]))
  await listener.psubscribe('own:host:*')
  return listener
}

/** A redis-server of the test's own and a proxy to it; `watch` hears each connection the proxy takes. */
async function proxiedRedis(): Promise<{ port: number; watch: Watch; proxy: RedisProxy }> {
  const port = await freePort()
  await redisServer(port)
  const watch = new Watch()
  return { port, watch, proxy: await proxyTo(port, watch) }
}

/** A proxy to the redis-server at `port`, closed after the test; `watch` hears each connection it takes. */
async function proxyTo(port: number, watch: Watch): Promise<RedisProxy> {
  const proxy = await RedisProxy.start(port, () => watch.changed())
  proxies.push(proxy)
  return proxy
}

/** Calls `changed` whenever Redis's keyspace event `event` happens to a key matching `pattern` on the redis-server at `port`. */
async function onKeyEvent(port: number, pattern: string, event: string, changed: () => void): Promise<Redis> {
  const admin = new Redis(port)
  await admin.config('SET', 'notify-keyspace-events', 'K$')
  const listener = new Redis(port)
  listener.on('pmessage', (_pattern: string, _key: string, happened: string) => happened === event && changed())
  await listener.psubscribe(`__keyspace@0__:${pattern}`)
  admin.disconnect()
  return listener
}

/** Calls `changed` whenever a job's lock is set on the redis-server at `port` (a node took it). */
const onLockSet = (port: number, changed: () => void) => onKeyEvent(port, '*:lock', 'set', changed)

/** Calls `changed` whenever a job is added on the redis-server at `port` (BullMQ numbers it by its queue's id key). */
const onJobAdded = (port: number, changed: () => void) => onKeyEvent(port, 'bull:own-*:id', 'incrby', changed)

/**
 * A node behind a proxy on a redis-server of the test's own, its subscriber cut and its
 * reconnection held (it hears nothing until `proxy.release()`), and a host beside it on Redis
 * directly; `taken.jobs` counts the jobs a node took (their locks set), `watch` hears each.
 */
async function deafNode(script: ScriptEntry[]) {
  const { port, watch, proxy } = await proxiedRedis()
  const node = await startNode({ connection: `redis://127.0.0.1:${proxy.port}`, queue: 'own', agentModules: [CONTRACT_MODULE], pool: { maxThreads: 1 }, redisTimeoutMs: 60_000, log: () => {} })
  nodes.push(node)
  const taken = { jobs: 0 }
  listeners.push(
    await onLockSet(port, () => {
      taken.jobs++
      watch.changed()
    }),
  )
  const { host, parent } = hostOn(`redis://127.0.0.1:${port}`, script)
  proxy.hold()
  expect(proxy.cut(':node:')).toBe(1)
  await watch.until("the node's subscriber reconnecting", () => proxy.held === 1)
  return { port, watch, proxy, node, host, parent, taken }
}

function hostOn(connection: RedisConnection, script: ScriptEntry[] = [], redisTimeoutMs = 1000) {
  const host = createHost({ transport: bullmqTransport({ connection, queue: 'own', redisTimeoutMs, nodeSilenceMs: 1000 }), agentModule: CONTRACT_MODULE })
  hosts.push(host)
  host.models.register('scripted', new ScriptedModel(script))
  return { host, parent: host.createAgent({ options: { provider: 'scripted', model: 'm' } }) }
}

// Servers, nodes and reconnections: generous on a loaded machine.
describe.skipIf(!HAVE_SERVER)('bullmq transport when Redis fails', { timeout: 120_000 }, () => {
  it('Redis restarting mid-run ends the child error naming Redis; a start while it is down fails in time; afterwards all works again', async () => {
    const port = await freePort()
    let server = await redisServer(port)
    const url = `redis://127.0.0.1:${port}`
    nodes.push(await startNode({ connection: url, queue: 'own', agentModules: [CONTRACT_MODULE], pool: { maxThreads: 1, childrenPerWorker: 2 }, log: () => {} }))
    const { host, parent } = hostOn({ host: '127.0.0.1', port, connectionName: HOST_NAME }, ['hang', textResponse('back again')])
    const run = await host.spawn.start({ prompt: 'wait', parent })
    // The child streamed its 'partial' and waits: it is running when Redis goes.
    await eventOf(run, 'assistant/chunk')

    await stopServer(server)
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toMatch(new RegExp(`this host lost its connection to Redis at redis://127\\.0\\.0\\.1:${port}|cannot reach Redis at redis://127\\.0\\.0\\.1:${port}`))
    await run.dispose()

    await expect(host.spawn.start({ prompt: 'while down', parent })).rejects.toThrow(new RegExp(`on Redis at redis://127\\.0\\.0\\.1:${port} within 1000 ms \\(redisTimeoutMs\\)`))

    server = await redisServer(port)
    // ioredis reconnects on its own: a start works once both ends have (its job waits for the node's workers to be back).
    await bothBack(port)
    const answer = await host.spawn.run({ prompt: 'again', parent })
    expect(answer).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'back again' }] })
  })

  it('a start queued when Redis lost its data fails ERR_SUBAGENT_NODE_LOST, even once jobs added after the loss count up to its old number', async () => {
    const port = await freePort()
    const server = await redisServer(port)
    const watch = new Watch()
    const added = { jobs: 0 }
    listeners.push(await onJobAdded(port, () => (added.jobs++, watch.changed())))
    // Room for one child: the second start waits in the queue.
    nodes.push(await startNode({ connection: `redis://127.0.0.1:${port}`, queue: 'own', agentModules: [CONTRACT_MODULE], pool: { maxThreads: 1, childrenPerWorker: 1 }, log: () => {} }))
    // Every child that runs waits: a job of a child that ended would be removed, its number free again.
    const { host, parent } = hostOn({ host: '127.0.0.1', port, connectionName: HOST_NAME }, ['hang', 'hang', 'hang'])
    const busy = await host.spawn.start({ prompt: 'wait', parent })
    await eventOf(busy, 'assistant/chunk')
    const waiting = host.spawn.start({ prompt: 'queued', parent })
    waiting.catch(() => {}) // awaited below
    await watch.until('the queued start to add its job', () => added.jobs === 2)

    // Redis keeps nothing on disk here: it comes back empty, its job counter with it.
    await stopServer(server)
    expect(await busy.result).toMatchObject({ stopReason: 'error' })
    await busy.dispose()
    await redisServer(port)
    await bothBack(port)
    const again = { jobs: 0 }
    listeners.push(await onJobAdded(port, () => (again.jobs++, watch.changed())))
    // Two more starts queue behind the first: BullMQ would number their jobs as it numbered the two before the loss, and the node runs one (which waits) and holds the other's job waiting.
    const after = [host.spawn.start({ prompt: 'after 1', parent }), host.spawn.start({ prompt: 'after 2', parent })]
    for (const start of after) start.catch(() => {}) // given up when the host closes
    await watch.until('two jobs added after the loss', () => again.jobs === 2)

    // The lost job is not taken for another's: the start fails, and says why.
    const error = await waiting.then(() => undefined, (reason: unknown) => reason)
    expect(error).toMatchObject({ code: 'ERR_SUBAGENT_NODE_LOST', message: expect.stringContaining('or Redis lost the job') })
  })

  it('a host made while Redis is away works once it is back, even after ioredis gave up on the subscription it had queued', async () => {
    const port = await freePort()
    // ioredis fails what it queued after maxRetriesPerRequest reconnects (20 by default, some 11 s): after 1 here, well within the first start's wait.
    const { host, parent } = hostOn({ host: '127.0.0.1', port, maxRetriesPerRequest: 1, connectionName: HOST_NAME }, [textResponse('here now')])
    await expect(host.spawn.start({ prompt: 'nobody there', parent })).rejects.toThrow(new RegExp(`could not subscribe to its Redis channel on Redis at redis://127\\.0\\.0\\.1:${port} within 1000 ms \\(redisTimeoutMs\\)`))
    await redisServer(port)
    nodes.push(await startNode({ connection: `redis://127.0.0.1:${port}`, queue: 'own', agentModules: [CONTRACT_MODULE], pool: { maxThreads: 1 }, log: () => {} }))
    await bothBack(port)
    expect(await host.spawn.run({ prompt: 'hi', parent })).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'here now' }] })
  })

  it("a node whose channel's connection dropped asks for no child until it listens again: a job it took meanwhile runs once it does", async () => {
    const { watch, proxy, host, parent, taken } = await deafNode([textResponse('heard')])
    // A start resolves once its child is built on the node.
    const started = host.spawn.start({ prompt: 'hi', parent })
    // The node took the job while it could not hear the host: an answer the host sent now would be lost.
    await watch.until('the node to take the job', () => taken.jobs === 1)
    proxy.release()
    const run = await started
    expect(await run.result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'heard' }] })
  })

  it('a node that shuts down while a job it took waits for its channel builds nothing: the job waits for another node, which runs the child', async () => {
    const { port, watch, proxy, node, host, parent, taken } = await deafNode([textResponse('built elsewhere')])
    // A start resolves once its child is built on a node.
    let built = false
    const started = host.spawn.start({ prompt: 'hi', parent })
    started.then(() => (built = true), () => {})
    await watch.until('the node to take the job', () => taken.jobs === 1)
    // Shut down before it could ask for the child: whether BullMQ had handed it the job yet (it
    // then waits for its channel, and asks for nothing once that is back) or not (the job finds
    // no room), the job goes back to the queue unrun.
    const closing = node.close(0)
    proxy.release()
    await closing
    expect(built).toBe(false)
    nodes.push(await startNode({ connection: `redis://127.0.0.1:${port}`, queue: 'own', agentModules: [CONTRACT_MODULE], pool: { maxThreads: 1 }, log: () => {} }))
    const run = await started
    expect(await run.result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'built elsewhere' }] })
  })

  it("a host's frames to a node link that ended, sent again when its connection is back, never reach the node's next link to it: the child that link asks for runs", async () => {
    const { port, watch, proxy } = await proxiedRedis()
    // The node directly on Redis, room for one child; it lets a silent host go after 3 s (its next link is welcomed well within that of the release).
    nodes.push(await startNode({ connection: `redis://127.0.0.1:${port}`, queue: 'own', agentModules: [CONTRACT_MODULE], pool: { maxThreads: 1, childrenPerWorker: 1 }, hostSilenceMs: 3000, log: () => {} }))
    const taken = { jobs: 0 }
    listeners.push(await onLockSet(port, () => (taken.jobs++, watch.changed())))
    const added = { jobs: 0 }
    listeners.push(await onJobAdded(port, () => (added.jobs++, watch.changed())))
    const hellos = { said: 0 }
    listeners.push(await onHostFrames(port, (frame) => frame.some((message) => message.type === 'hello') && (hellos.said++, watch.changed())))
    // The host behind the proxy, patient with Redis and with the node while its publisher is held.
    const host = createHost({ transport: bullmqTransport({ connection: { host: '127.0.0.1', port: proxy.port }, queue: 'own', redisTimeoutMs: 10_000, nodeSilenceMs: 10_000 }), agentModule: CONTRACT_MODULE })
    hosts.push(host)
    host.models.register('scripted', new ScriptedModel(['hang', textResponse('on the next link')]))
    const parent = host.createAgent({ options: { provider: 'scripted', model: 'm' } })
    const busy = await host.spawn.start({ prompt: 'wait', parent })
    await eventOf(busy, 'assistant/chunk')
    // Queued behind the busy child, on the node's first link's word that it has no room.
    const again = host.spawn.start({ prompt: 'again', parent })
    await watch.until('the queued job to be added', () => added.jobs === 2)
    // The host's publisher is cut: its link to the node is over, and the bye it says to it waits in ioredis's queue.
    proxy.hold()
    expect(proxy.cut(':node:')).toBe(1)
    await watch.until("the host's publisher reconnecting", () => proxy.held === 1)
    expect(await busy.result).toMatchObject({ stopReason: 'error', diagnostic: expect.stringContaining('lost its connection to Redis') })
    // The node hears nothing from the host, lets its link go, takes the queued job and asks for its child on a link of its own.
    await watch.until('the node to take the queued job', () => taken.jobs === 2)
    await watch.until("the node's next link's hello", () => hellos.said === 2)
    // The old link's bye comes first, then the answers to the new one.
    proxy.release()
    const run = await again
    expect(await run.result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'on the next link' }] })
  })

  it("a host whose channel's connection dropped queues no job until it listens again: a start meanwhile fails in redisTimeoutMs, and none was added", async () => {
    const { port, watch, proxy } = await proxiedRedis()
    nodes.push(await startNode({ connection: `redis://127.0.0.1:${port}`, queue: 'own', agentModules: [CONTRACT_MODULE], pool: { maxThreads: 1 }, log: () => {} }))
    const { host, parent } = hostOn({ host: '127.0.0.1', port: proxy.port, connectionName: HOST_NAME }, [textResponse('first'), textResponse('again')])
    expect(await host.spawn.run({ prompt: 'hi', parent })).toMatchObject({ stopReason: 'completed' })
    proxy.hold()
    expect(proxy.cut(':host:')).toBe(1)
    await watch.until("the host's subscriber reconnecting", () => proxy.held === 1)
    // Its job would name a channel nobody listens to: the node's take would be lost.
    await expect(host.spawn.start({ prompt: 'unheard', parent })).rejects.toThrow(new RegExp(`could not subscribe to its Redis channel on Redis at redis://127\\.0\\.0\\.1:${proxy.port} within 1000 ms \\(redisTimeoutMs\\)`))
    // BullMQ numbers a queue's jobs: only the first start's was ever added.
    const admin = new Redis(port)
    try {
      expect(await admin.keys('bull:own-*:id')).toHaveLength(1)
      expect(await admin.get((await admin.keys('bull:own-*:id'))[0]!)).toBe('1')
    } finally {
      admin.disconnect()
    }
    proxy.release()
    await bothBack(port)
    expect(await host.spawn.run({ prompt: 'again', parent })).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'again' }] })
  })

  it('credentials pass through: a password-protected Redis is used with the password and refused without', async () => {
    const port = await freePort()
    await redisServer(port, 's3cret')
    nodes.push(await startNode({ connection: { host: '127.0.0.1', port, password: 's3cret' }, queue: 'own', agentModules: [CONTRACT_MODULE], pool: { maxThreads: 1 }, log: () => {} }))
    const { host, parent } = hostOn(`redis://:s3cret@127.0.0.1:${port}`, [textResponse('authenticated')])
    expect(await host.spawn.run({ prompt: 'hi', parent })).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'authenticated' }] })

    const watch = new Watch()
    const proxy = await proxyTo(port, watch)
    const { host: stranger, parent: nobody } = hostOn(`redis://127.0.0.1:${proxy.port}`, [textResponse('never')])
    await expect(stranger.spawn.start({ prompt: 'hi', parent: nobody })).rejects.toThrow(/the host could not subscribe to its Redis channel on Redis at redis:\/\/127\.0\.0\.1:\d+.*NOAUTH/)
    // ioredis drops a connection whose ready check Redis refused, and connects again: each of the host's two clients has done so twice.
    await watch.until("the stranger's connections to have been refused twice each", () => proxy.closed >= 4)
    // Redis's answer stands through that: a later start fails at once with it, not after redisTimeoutMs.
    await expect(stranger.spawn.start({ prompt: 'again', parent: nobody })).rejects.toThrow(/the host could not subscribe to its Redis channel on Redis at redis:\/\/127\.0\.0\.1:\d+: NOAUTH/)
    await expect(startNode({ connection: { host: '127.0.0.1', port }, queue: 'own', redisTimeoutMs: 1000, log: () => {} })).rejects.toThrow(/could not reach Redis .*NOAUTH/)
  })
})
