/**
 * Redis connections for both ends. A caller gives a `redis://` / `rediss://` URL or ioredis
 * options (credentials and TLS pass through untouched); we open the clients ourselves, so the
 * ones BullMQ uses and the ones that carry frames share one configuration.
 */
import { Redis, type RedisOptions } from 'ioredis'
import { subagentError } from '../protocol/errors.js'

/** A Redis URL (`rediss://` for TLS) or ioredis options: host, port, username, password, tls, db. */
export type RedisConnection = string | RedisOptions

/** A client on `connection`; `overrides` are ours (BullMQ's workers need maxRetriesPerRequest: null). */
export function redisClient(connection: RedisConnection, overrides: RedisOptions = {}): Redis {
  const client = typeof connection === 'string' ? new Redis(connection, overrides) : new Redis({ ...connection, ...overrides })
  client.once('ready', () => everReady.add(client))
  return client
}

/** Clients that reached Redis once: one that is only reconnecting may still send what it queued. */
const everReady = new WeakSet<Redis>()

/** Where a connection points, for error messages (never its password). */
export function describeRedis(connection: RedisConnection): string {
  if (typeof connection === 'string') {
    try {
      const url = new URL(connection)
      return `${url.protocol}//${url.hostname}:${url.port || 6379}`
    } catch {
      return 'the given Redis URL'
    }
  }
  if (connection.path) return `redis at ${connection.path}`
  return `${connection.tls ? 'rediss' : 'redis'}://${connection.host ?? '127.0.0.1'}:${connection.port ?? 6379}`
}

/** Rejects with `what` named when `promise` takes longer than `ms`: ioredis and BullMQ retry a lost Redis forever. */
export async function within<T>(promise: Promise<T>, ms: number, what: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(subagentError('ERR_SUBAGENT_UNREACHABLE', what())), ms)
  })
  try {
    return await Promise.race([promise, late])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * Closes a client without waiting on a Redis that is gone: QUIT when it answers in time, else
 * disconnect. A client that never reached Redis disconnects at once: its QUIT would only wait
 * in the offline queue for a Redis that never came.
 */
export async function quit(client: Redis, ms: number): Promise<void> {
  if (client.status === 'end') return
  if (!everReady.has(client)) return client.disconnect()
  try {
    await within(client.quit(), ms, () => 'quit timed out')
  } catch {
    client.disconnect()
  }
}
