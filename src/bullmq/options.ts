/** What both ends of the BullMQ transport check alike in their options: only known keys, where Redis is, and the queue. */
import { InvalidOptionError } from '../parent/options.js'
import { DEFAULT_QUEUE, validQueueName } from './names.js'
import type { RedisConnection } from './redis.js'

/** `options` (named `what` in errors) has only `keys`, a connection and a valid queue (default DEFAULT_QUEUE). */
export function checkedPlace(options: unknown, what: string, keys: ReadonlySet<string>, known: string): { connection: RedisConnection; queue: string } {
  if (typeof options !== 'object' || options === null) throw new InvalidOptionError(what, options, 'an object with a connection')
  for (const key of Object.keys(options)) {
    if (!keys.has(key)) throw new InvalidOptionError(key, (options as Record<string, unknown>)[key], `${known} (${[...keys].join(', ')})`)
  }
  const { connection, queue = DEFAULT_QUEUE } = options as { connection?: unknown; queue?: unknown }
  if (typeof connection === 'string' ? !isRedisUrl(connection) : typeof connection !== 'object' || connection === null) {
    throw new InvalidOptionError('connection', connection, 'a redis:// or rediss:// URL, or ioredis options ({ host, port, password, tls, or path for a socket })')
  }
  if (!validQueueName(queue)) throw new InvalidOptionError('queue', queue, 'a queue name of 1 to 100 letters, digits, dots, dashes or underscores')
  return { connection: connection as RedisConnection, queue }
}

/** ioredis reads any other string as a socket path, so `http://host` or `host:6379` would fail late, as a missing file. */
function isRedisUrl(text: string): boolean {
  return URL.canParse(text) && ['redis:', 'rediss:'].includes(new URL(text).protocol)
}
