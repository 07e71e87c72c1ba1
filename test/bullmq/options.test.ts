/**
 * The BullMQ transport's options and its failures without Redis. None of these needs a Redis:
 * they point at a port nobody listens on, where every wait must end in a clear error within
 * redisTimeoutMs instead of BullMQ's and ioredis's retrying forever.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { createHost, InvalidOptionError, ScriptedModel, textResponse, type Host } from 'subagent-worker'
import { bullmqTransport, startNode } from 'subagent-worker/bullmq'
import { freePort } from '../support/redis.js'

const hosts: Host[] = []
afterEach(async () => {
  await Promise.all(hosts.splice(0).map((host) => host.close()))
})

describe('bullmqTransport options', () => {
  it.each([
    [{}, 'connection', 'connection must be a redis:// or rediss:// URL, or ioredis options'],
    [{ connection: 6379 }, 'connection', 'connection must be a redis:// or rediss:// URL, or ioredis options'],
    // ioredis would take these for socket paths and fail late, as a missing file.
    [{ connection: 'http://127.0.0.1:6379' }, 'connection', 'connection must be a redis:// or rediss:// URL, or ioredis options'],
    [{ connection: '127.0.0.1:6379' }, 'connection', 'connection must be a redis:// or rediss:// URL, or ioredis options'],
    [{ connection: 'redis://x', queue: 'a:b' }, 'queue', 'queue must be a queue name of 1 to 100 letters, digits, dots, dashes or underscores, not "a:b"'],
    [{ connection: 'redis://x', redisTimeoutMs: 0 }, 'redisTimeoutMs', 'redisTimeoutMs must be a whole number from 1 to'],
    [{ connection: 'redis://x', nodeSilenceMs: 10 }, 'nodeSilenceMs', 'nodeSilenceMs must be a whole number from 500 to'],
    [{ connection: 'redis://x', placementTimeoutMs: 0 }, 'placementTimeoutMs', 'placementTimeoutMs must be a whole number from 1 to'],
    [{ connection: 'redis://x', placementTimeoutMs: 1.5 }, 'placementTimeoutMs', 'placementTimeoutMs must be a whole number from 1 to'],
    [{ connection: 'redis://x', queues: 'q' }, 'queues', 'queues must be a known bullmqTransport option'],
  ])('%j is refused, naming %s', (options, option, message) => {
    const attempt = () => bullmqTransport(options as never)
    expect(attempt).toThrow(InvalidOptionError)
    expect(attempt).toThrow(message)
    try {
      attempt()
    } catch (error) {
      expect((error as InvalidOptionError).option).toBe(option)
    }
  })

  it.each(['isolation', 'pool', 'sandbox'] as const)('createHost refuses %s beside a transport: the nodes run the children', (key) => {
    const value = key === 'isolation' ? 'worker' : key === 'pool' ? { maxThreads: 2 } : { fsRead: ['/tmp'] }
    const attempt = () => createHost({ transport: bullmqTransport({ connection: 'redis://127.0.0.1:1' }), [key]: value })
    expect(attempt).toThrow(InvalidOptionError)
    expect(attempt).toThrow(`${key} must be left out when a transport is given (the bullmq transport's runners are configured where they run)`)
  })

  it('createHost refuses a transport that is not one', () => {
    expect(() => createHost({ transport: { name: 'x' } as never })).toThrow('transport must be a transport made for createHost')
  })

  it('one transport serves one host', async () => {
    const transport = bullmqTransport({ connection: `redis://127.0.0.1:${await freePort()}`, redisTimeoutMs: 200 })
    hosts.push(createHost({ transport }))
    expect(() => createHost({ transport })).toThrow('a bullmqTransport() serves one host: make one per createHost()')
  })
})

describe('bullmq transport without a Redis', () => {
  it('a start fails within redisTimeoutMs, naming Redis and where it was looked for; close() does not hang', async () => {
    const port = await freePort()
    const host = createHost({ transport: bullmqTransport({ connection: `redis://127.0.0.1:${port}`, redisTimeoutMs: 300 }) })
    hosts.push(host)
    host.models.register('scripted', new ScriptedModel([textResponse('never')]))
    const parent = host.createAgent({ options: { provider: 'scripted', model: 'm' } })
    const error = await host.spawn.start({ prompt: 'hi', parent }).then(
      () => undefined,
      (reason: unknown) => reason as Error,
    )
    expect(error?.message).toMatch(new RegExp(`the host could not subscribe to its Redis channel on Redis at redis://127\\.0\\.0\\.1:${port} within 300 ms \\(redisTimeoutMs\\): .*ECONNREFUSED.*Is Redis running and reachable\\?`))
    expect(host.agents.list().filter((agent) => agent.id !== parent.id)).toEqual([])
    await host.close()
  })

  it('a node that cannot reach Redis fails to start within its bound, naming Redis', async () => {
    const port = await freePort()
    const error = await startNode({ connection: { host: '127.0.0.1', port }, redisTimeoutMs: 300, name: 'lonely' }).then(
      () => undefined,
      (reason: unknown) => reason as Error,
    )
    expect(error?.message).toMatch(new RegExp(`node lonely could not reach Redis at redis://127\\.0\\.0\\.1:${port} within 300 ms: .*ECONNREFUSED`))
  })

  it.each([
    [{ connection: 'redis://x', queue: '' }, 'queue must be a queue name'],
    [{ connection: 'redis://x', agentModules: ['./relative.mjs'] }, 'agentModule must be a URL'],
    [{ connection: 'redis://x', pool: { maxThreads: 0 } }, 'pool.maxThreads must be a whole number from 1 to 1024, not 0'],
    [{ connection: 'redis://x', pool: { niceIncrement: 20 } }, 'pool.niceIncrement must be a whole number from 0 to 19, not 20'],
    [{ connection: 'redis://x', threads: 2 }, 'threads must be a known node option'],
    [{ connection: 'redis://x', name: 'gpu box' }, 'name must be a name of 1 to 200 printable ASCII characters without spaces'],
    [{ connection: 'redis://x', name: '' }, 'name must be a name of 1 to 200 printable ASCII characters without spaces'],
  ])('startNode(%j) is refused before connecting', async (options, message) => {
    await expect(startNode(options as never)).rejects.toThrow(message)
  })
})
