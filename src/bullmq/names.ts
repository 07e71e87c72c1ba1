/**
 * Where things wait and travel on Redis: the BullMQ queues (one a delegation depth) and the
 * pub/sub channels (one a receiver, a host's or a node's).
 *
 * Frames travel by Redis pub/sub, each envelope naming its sender and the node's link. Pub/sub, not Streams: a round
 * trip on loopback measured 0.12-0.18 ms against 0.25 ms for XADD + XREAD, and nothing is stored
 * or trimmed. Its catch, delivery only to a live subscriber, is closed by the order of things
 * (each end subscribes before it can be addressed) and by treating any dropped Redis connection
 * as the end of every link over it.
 */
import { PROTOCOL_VERSION } from '../protocol/messages.js'
import { levelOf } from '../remote/broker.js'

export const DEFAULT_QUEUE = 'subagent-worker'

/**
 * Children of each delegation depth wait in a queue of their own, as they get a pool of their own
 * on one host: a child waiting for its own child holds its node slot, so with one queue a wave of
 * nested delegations could fill every slot with waiting parents. Deeper ones share the last.
 */
export const QUEUE_DEPTHS = 4

const QUEUE_NAME = /^[A-Za-z0-9_.-]{1,100}$/

/** Whether `name` can name a queue (BullMQ refuses ':'; we keep to a plain, portable set). */
export function validQueueName(name: unknown): name is string {
  return typeof name === 'string' && QUEUE_NAME.test(name)
}

/** The BullMQ queue for children of `depth`. The protocol version is in the name: a node never sees a job it cannot read. */
export function queueName(queue: string, depth: number): string {
  return `${queue}-v${PROTOCOL_VERSION}-depth${levelOf(depth, QUEUE_DEPTHS)}`
}

export const hostChannel = (queue: string, host: string) => `${queue}:host:${host}`
export const nodeChannel = (queue: string, node: string) => `${queue}:node:${node}`
