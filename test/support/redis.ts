/**
 * Whether the BullMQ tests can run: a Redis at REDIS_URL (default redis://127.0.0.1:6379). Without
 * one they skip and say how to run them, so `npm test` passes on a laptop; with CI set they must run.
 */
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
