/**
 * What crosses Redis: the queues' and channels' names, the frame envelope, the job and the take.
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
import { count, variant, type Wire } from '../protocol/schema.js'
import { validator } from '../protocol/validate.js'

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

const id = { type: 'string', minLength: 1 } as const

/**
 * A BullMQ job names one child and the host to ask for it, nothing more: whoever can write to
 * Redis can edit a job, so what the child is (its spec, tools, persona) never rides in it. The
 * node that takes the job asks the host for the child with a `take`, and the host answers with
 * the `create` over the link. Open, not closed: fields someone added are ignored, not obeyed.
 */
const ChildJob = { type: 'object', properties: { v: count, host: id, child: id }, required: ['v', 'host', 'child'] } as const
export type ChildJob = Wire<typeof ChildJob>
const isChildJob = validator<ChildJob>(ChildJob)

/**
 * Node → host, its first word about a job it took: the child the job names and the job's lock
 * token, which BullMQ gave only the worker it handed the job to. The host gives the child to the
 * first node whose token matches the job's lock in Redis. Not a runner message: it is answered by
 * the transport (with the `create`, or a `drop`), before the child is on any channel.
 */
const TakeMessage = variant('take', { child: id, token: id })
export type TakeMessage = Wire<typeof TakeMessage>
export const isTakeMessage = validator<TakeMessage>(TakeMessage)

export function childJob(host: string, child: string): ChildJob {
  return { v: PROTOCOL_VERSION, host, child }
}

/** The job's host and child, or why it is not a job this node can run. */
export function readJob(data: unknown): { host: string; child: string } | Error {
  const v = typeof data === 'object' && data !== null ? (data as { v?: unknown }).v : undefined
  if (v !== undefined && v !== PROTOCOL_VERSION) return new Error(`the job speaks frame protocol v${String(v)} but this node speaks v${PROTOCOL_VERSION}`)
  if (!isChildJob(data)) return new Error(`the job is not a subagent-worker child job: ${isChildJob.explain(data, 'job')}`)
  return { host: data.host, child: data.child }
}

/** A frame's takes apart from its runner messages (which the channel checks as it would a thread's). */
export function takesOf(frame: unknown): { takes: TakeMessage[]; rest: unknown } {
  if (!Array.isArray(frame)) return { takes: [], rest: frame }
  const takes = frame.filter(isTakeMessage)
  return takes.length === 0 ? { takes, rest: frame } : { takes, rest: frame.filter((message) => !isTakeMessage(message)) }
}
