/**
 * Whether the BullMQ tests can run: a Redis at REDIS_URL (default redis://127.0.0.1:6379). Without
 * one they skip and say how to run them, so `npm test` passes on a laptop; with CI set they must run.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { connect, createServer, type Server, type Socket } from 'node:net'
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

/**
 * A TCP proxy in front of a Redis, for a test that cuts one client's connection and holds its
 * reconnection: each connection through it keeps what its client sent (the first 64 KB), so a
 * test can cut the one that subscribed to a channel; while held, a new connection is accepted
 * but goes nowhere (its client waits for its ready check) until released. `changed` is called
 * when a connection comes in or closes.
 */
export class RedisProxy {
  readonly #server: Server
  readonly #target: number
  readonly #connections = new Set<{ client: Socket; upstream: Socket | undefined; sent: string }>()
  readonly #held: Socket[] = []
  #holding = false
  #closed = 0

  private constructor(server: Server, target: number, changed: () => void) {
    this.#server = server
    this.#target = target
    server.on('connection', (client) => {
      const connection = { client, upstream: undefined as Socket | undefined, sent: '' }
      this.#connections.add(connection)
      client.on('data', (chunk: Buffer) => {
        if (connection.sent.length < 65_536) connection.sent += chunk.toString('latin1')
      })
      client.on('close', () => {
        connection.upstream?.destroy()
        this.#connections.delete(connection)
        this.#closed++
        changed()
      })
      client.on('error', () => {})
      if (this.#holding) {
        client.pause()
        this.#held.push(client)
      } else {
        this.#pipe(connection)
      }
      changed()
    })
  }

  static async start(target: number, changed: () => void = () => {}): Promise<RedisProxy> {
    const server = createServer()
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    return new RedisProxy(server, target, changed)
  }

  get port(): number {
    return (this.#server.address() as { port: number }).port
  }

  /** How many connections have closed. */
  get closed(): number {
    return this.#closed
  }

  /** How many connections wait, held. */
  get held(): number {
    return this.#held.length
  }

  /** Connections made from now on wait until release(). */
  hold(): void {
    this.#holding = true
  }

  /** The held connections go through to Redis, what their clients sent meanwhile first; new ones go straight through. */
  release(): void {
    this.#holding = false
    for (const client of this.#held.splice(0)) {
      const connection = [...this.#connections].find((each) => each.client === client)
      if (connection) this.#pipe(connection)
    }
  }

  /** Drops every connection whose client sent `text` (say, a channel it subscribed to); how many. */
  cut(text: string): number {
    let cut = 0
    for (const connection of this.#connections) {
      if (!connection.sent.includes(text)) continue
      connection.client.destroy()
      connection.upstream?.destroy()
      cut++
    }
    return cut
  }

  async close(): Promise<void> {
    for (const { client, upstream } of this.#connections) {
      client.destroy()
      upstream?.destroy()
    }
    await new Promise((resolve) => this.#server.close(resolve))
  }

  #pipe(connection: { client: Socket; upstream: Socket | undefined }): void {
    const upstream = connect(this.#target, '127.0.0.1')
    upstream.on('error', () => connection.client.destroy())
    upstream.on('close', () => connection.client.destroy())
    connection.upstream = upstream
    connection.client.pipe(upstream)
    upstream.pipe(connection.client)
  }
}
