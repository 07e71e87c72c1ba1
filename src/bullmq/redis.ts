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

/**
 * One channel a client listens to, and whether it does now. Pub/sub drops what is published to a
 * channel nobody listens to, so an end listens before it does anything the other end answers (a
 * host adds a job, a node takes one), at the start and again after every reconnect: a node that
 * took a job while its subscriber was still reconnecting never heard the host's answer, and its
 * child waited for good. The client is made with ioredis's own resubscribe off (its
 * acknowledgement is not surfaced): this subscribes again at each `ready` after a dropped
 * connection, and `current` settles on Redis's acknowledgement.
 */
export class Subscription {
  #current: Promise<void>
  /** Settles the re-armed `current`: set while the connection is down or not yet subscribed again. */
  #resubscribed: (() => void) | undefined

  constructor(client: Redis, channel: string) {
    this.#current = client.subscribe(channel).then(() => this.#follow(client, channel))
    this.#current.catch(() => {}) // surfaced by whoever waits on current
  }

  /** Resolves once the channel is listened to now; rejects if the first subscription failed. */
  get current(): Promise<void> {
    return this.#current
  }

  /** From the first acknowledgement on: a dropped connection re-arms `current`, and the next ready subscribes again. */
  #follow(client: Redis, channel: string): void {
    client.on('close', () => {
      if (!this.#resubscribed) this.#current = new Promise((resolve) => (this.#resubscribed = resolve))
    })
    client.on('ready', () => {
      const resolve = this.#resubscribed
      if (!resolve) return
      // A subscribe cut off by another drop is sent again by ioredis, or by the next ready.
      client.subscribe(channel).then(() => {
        if (this.#resubscribed !== resolve) return
        this.#resubscribed = undefined
        resolve()
      }, () => {})
    })
  }
}

/** What a subscriber client is made with: it subscribes again itself (see Subscription). */
export const SUBSCRIBER = { autoResubscribe: false } as const satisfies RedisOptions

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
