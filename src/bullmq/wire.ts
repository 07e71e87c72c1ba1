/**
 * What crosses Redis: the queues' and channels' names, the frame envelope and the job.
 *
 * Frames travel by Redis pub/sub, one channel per receiver (a host's, a node's), each envelope
 * naming its sender. Pub/sub, not Streams: a round trip on loopback measured 0.12-0.18 ms against
 * 0.25 ms for XADD + XREAD, and nothing is stored or trimmed. Its catch, delivery only to a live
 * subscriber, is closed by the order of things (each end subscribes before it can be addressed)
 * and by treating any dropped Redis connection as the end of every link over it.
 *
 * Envelopes are V8-serialized, the structured clone a worker thread's frames use, so values cross
 * a network exactly as they cross a thread; the receiver validates the frame as it would a thread's.
 */
import { deserialize, serialize } from 'node:v8'
import { PROTOCOL_VERSION, type HostMessage } from '../protocol/messages.js'
import { isHostMessage } from '../protocol/validators.js'

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
  const level = Math.min(Math.max(depth, 1), QUEUE_DEPTHS)
  return `${queue}-v${PROTOCOL_VERSION}-depth${level}`
}

export const hostChannel = (queue: string, host: string) => `${queue}:host:${host}`
export const nodeChannel = (queue: string, node: string) => `${queue}:node:${node}`

export function encode(from: string, frame: unknown[]): Buffer {
  return serialize([from, frame])
}

/** The sender and the frame, or why the bytes are no envelope. */
export function decode(bytes: Buffer): { from: string; frame: unknown } | Error {
  try {
    const envelope: unknown = deserialize(bytes)
    if (!Array.isArray(envelope) || envelope.length !== 2 || typeof envelope[0] !== 'string') return new Error('not a [sender, frame] envelope')
    return { from: envelope[0], frame: envelope[1] }
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error))
  }
}

export type CreateMessage = Extract<HostMessage, { type: 'create' }>

/** A BullMQ job: one child to build, and the host to answer. BullMQ stores data as JSON, so the create message rides V8-serialized. */
export interface ChildJob {
  v: number
  host: string
  child: string
  create: string
}

export function childJob(host: string, create: CreateMessage): ChildJob {
  return { v: PROTOCOL_VERSION, host, child: create.child, create: serialize(create).toString('base64') }
}

/** The job's host and create message, or why it is not a job this node can run. */
export function readJob(data: unknown): { host: string; create: CreateMessage } | Error {
  const job = data as Partial<ChildJob> | null
  if (typeof job !== 'object' || job === null || typeof job.host !== 'string' || typeof job.create !== 'string' || typeof job.child !== 'string') {
    return new Error('the job is not a subagent-worker child job')
  }
  if (job.v !== PROTOCOL_VERSION) return new Error(`the job speaks frame protocol v${String(job.v)} but this node speaks v${PROTOCOL_VERSION}`)
  let create: unknown
  try {
    create = deserialize(Buffer.from(job.create, 'base64'))
  } catch (error) {
    return new Error(`the job's create message could not be read: ${(error as Error).message}`)
  }
  if (!isHostMessage(create) || create.type !== 'create' || create.child !== job.child) {
    return new Error(`the job's create message is malformed: ${isHostMessage.explain(create, 'create')}`)
  }
  return { host: job.host, create }
}
