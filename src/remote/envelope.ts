/**
 * What crosses a broker between a host and a node, whatever the broker: the frame envelope, the
 * job and the take. A broker adapter (src/bullmq) only moves these bytes and jobs.
 *
 * Envelopes are V8-serialized, the structured clone a worker thread's frames use, so values cross
 * a network exactly as they cross a thread; the receiver validates the frame as it would a thread's.
 */
import { deserialize, serialize } from 'node:v8'
import { PROTOCOL_VERSION, type HostMessage } from '../protocol/messages.js'
import { count, variant, type Wire } from '../protocol/schema.js'
import { validator } from '../protocol/validate.js'
import { subagentError, versionMismatchText } from '../protocol/errors.js'

export function encode(from: string, frame: unknown[]): Buffer {
  return serialize([from, frame])
}

/** The sender and the frame, or why the bytes are no envelope. */
export function decode(bytes: Buffer): { from: string; frame: unknown } | Error {
  try {
    const envelope: unknown = deserialize(bytes)
    if (!Array.isArray(envelope) || envelope.length !== 2 || typeof envelope[0] !== 'string') return subagentError('ERR_SUBAGENT_REMOTE_SHAPE', 'not a [sender, frame] envelope')
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
const isChildJob = validator(ChildJob)

/**
 * Node → host, its first word about a job it took: the child the job names and the job's lock
 * token, which BullMQ gave only the worker it handed the job to. The host gives the child to the
 * first node whose token matches the job's lock in Redis. Not a runner message: it is answered by
 * the transport (with the `create`, or a `drop`), before the child is on any channel.
 */
const TakeMessage = variant('take', { child: id, token: id })
export type TakeMessage = Wire<typeof TakeMessage>
export const isTakeMessage = validator(TakeMessage)

export function childJob(host: string, child: string): ChildJob {
  return { v: PROTOCOL_VERSION, host, child }
}

/** The job's host and child, or why it is not a job this node can run. */
export function readJob(data: unknown): { host: string; child: string } | Error {
  const v = typeof data === 'object' && data !== null ? (data as { v?: unknown }).v : undefined
  if (v !== undefined && v !== PROTOCOL_VERSION) return subagentError('ERR_SUBAGENT_VERSION', versionMismatchText('the job', v, 'this node', PROTOCOL_VERSION, false))
  if (!isChildJob(data)) return subagentError('ERR_SUBAGENT_REMOTE_SHAPE', `the job is not a subagent-worker child job: ${isChildJob.explain(data, 'job')}`)
  return { host: data.host, child: data.child }
}

/** A frame's takes apart from its runner messages (which the channel checks as it would a thread's). */
export function takesOf(frame: unknown): { takes: TakeMessage[]; rest: unknown } {
  if (!Array.isArray(frame)) return { takes: [], rest: frame }
  const takes = frame.filter(isTakeMessage)
  return takes.length === 0 ? { takes, rest: frame } : { takes, rest: frame.filter((message) => !isTakeMessage(message)) }
}
