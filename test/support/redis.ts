/**
 * Whether the BullMQ tests can run: a Redis at REDIS_URL (default redis://127.0.0.1:6379). Without
 * one they skip and say how to run them, so `npm test` passes on a laptop; with CI set they must run.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { createServer } from 'node:net'
import { Redis } from 'ioredis'

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

export const NO_REDIS = `no Redis at ${REDIS_URL}: the BullMQ transport's tests are skipped. Start one (redis-server, or docker run -p 6379:6379 redis) or point REDIS_URL at one to run them.`

/** Resolves true when a Redis answers PING within a second. */
export async function redisReachable(url = REDIS_URL): Promise<boolean> {
  const client = new Redis(url, { lazyConnect: true, connectTimeout: 1000, maxRetriesPerRequest: 0, retryStrategy: () => null })
  client.on('error', () => {})
  try {
    await client.connect()
    return (await client.ping()) === 'PONG'
  } catch {
    return false
  } finally {
    client.disconnect()
  }
}

/** A loopback port nobody listens on (for a redis-server of a test's own, or for a Redis that is not there). */
export async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise((resolve) => server.close(resolve))
  return port
}

/**
 * A redis-server of a test's own on `port`, keeping nothing on disk: given to `track` at once (the
 * test kills it when done), resolved once it says it accepts connections.
 */
export async function startRedisServer(port: number, track: (server: ChildProcess) => void, password?: string): Promise<ChildProcess> {
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...(password ? ['--requirepass', password] : [])]
  const server = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'ignore'] })
  track(server)
  let said = ''
  await new Promise<void>((resolve, reject) => {
    // Read its log to the end, so a full pipe never blocks it.
    server.stdout!.on('data', (chunk: Buffer) => {
      said += chunk.toString()
      if (said.includes('Ready to accept connections')) resolve()
    })
    server.once('exit', (code) => reject(new Error(`redis-server on port ${port} exited (${code}) before accepting connections:\n${said}`)))
  })
  return server
}
