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
 * acknowledgement is not surfaced), and this subscribes itself:
 *
 *   subscribing  a SUBSCRIBE is on its way (queued by ioredis while it connects): `current` waits.
 *   listening    Redis acknowledged it: `current` is resolved.
 *   down         the connection dropped, or a SUBSCRIBE was lost with it (ioredis gives up on a
 *                queued command after maxRetriesPerRequest reconnects): `current` waits for the
 *                SUBSCRIBE sent at the next `ready`. So a host made while Redis is away works once
 *                it is back, where it used to keep that first failure for good.
 *   refused      Redis answered the SUBSCRIBE with an error (NOAUTH, an ACL): `current` rejects
 *                with it at once, across reconnects (ioredis reconnects after a failed AUTH), until
 *                a `ready` lets a SUBSCRIBE be tried again.
 */
export class Subscription {
  readonly #client: Redis
  readonly #channel: string
  #state: 'subscribing' | 'listening' | 'down' | 'refused' = 'subscribing'
  #current!: Promise<void>
  /** Settles `current` while it waits: set from the moment the channel is not listened to until it is again, or is refused. */
  #settle: ((error?: Error) => void) | undefined

  constructor(client: Redis, channel: string) {
    this.#client = client
    this.#channel = channel
    this.#subscribe()
    client.on('close', () => {
      if (this.#state !== 'listening') return
      this.#state = 'down'
      this.#wait()
    })
    client.on('ready', () => {
      if (this.#state === 'down' || this.#state === 'refused') this.#subscribe()
    })
  }

  /** Whether the channel is listened to now: a wait on `current` would settle at once. */
  get listening(): boolean {
    return this.#state === 'listening'
  }

  /** Resolves once the channel is listened to now; rejects with Redis's answer when it refused the subscription. */
  get current(): Promise<void> {
    return this.#current
  }

  #subscribe(): void {
    this.#state = 'subscribing'
    if (!this.#settle) this.#wait()
    this.#client.subscribe(this.#channel).then(
      () => {
        this.#state = 'listening'
        this.#settled()
      },
      (error: Error) => {
        // Lost with the connection rather than answered by Redis (ioredis's ReplyError): the wait goes on, for the next ready's SUBSCRIBE.
        if (error.name !== 'ReplyError') return void (this.#state = 'down')
        this.#state = 'refused'
        this.#settled(error)
      },
    )
  }

  /** `current` waits from now until the channel is listened to, or refused. */
  #wait(): void {
    this.#current = new Promise<void>((resolve, reject) => {
      this.#settle = (error) => (error ? reject(error) : resolve())
    })
    this.#current.catch(() => {}) // surfaced by whoever waits on current
  }

  #settled(error?: Error): void {
    const settle = this.#settle
    this.#settle = undefined
    settle?.(error)
  }
}

/**
 * What a subscriber client is made with: it subscribes again itself (see Subscription), a
 * SUBSCRIBE in flight when the connection drops is sent again or failed (never dropped unsettled),
 * and none times out on its own (a late acknowledgement with no `ready` after it would leave the
 * subscription waiting for good; every wait on it is bounded by redisTimeoutMs instead).
 */
export const SUBSCRIBER = { autoResubscribe: false, autoResendUnfulfilledCommands: true, commandTimeout: undefined } as const satisfies RedisOptions

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
