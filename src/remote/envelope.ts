/**
 * What crosses a broker between a host and a node, whatever the broker: the frame envelope, the
 * job, the take and the room (their shapes are in src/protocol/shapes/job.ts). A broker adapter (src/bullmq) only
 * moves these bytes and jobs.
 *
 * Envelopes are V8-serialized, the structured clone a worker thread's frames use, so values cross
 * a network exactly as they cross a thread; the receiver validates the frame as it would a thread's.
 */
import { deserialize, serialize } from 'node:v8'
import { PROTOCOL_VERSION, type HostMessage } from '../protocol/messages.js'
import type { ChildJob, RoomMessage, TakeMessage } from '../protocol/shapes/job.js'
import { isChildJob, isRoomMessage, isTakeMessage } from '../protocol/validators.js'
import { subagentError, versionMismatchText } from '../protocol/errors.js'
import { RUNNER_BOUNDS } from '../protocol/bounds.js'

/**
 * `link` names the node's link to that host the frame belongs to: a node opens each link with an
 * id of its own, and a frame of another (an ended) link is not read. ioredis sends again what it
 * queued while Redis was away, so a host's `bye` to a link that ended with the connection would
 * otherwise end the node's next link to it, taking the child that link was asking for.
 */
export function encode(from: string, link: string, frame: unknown[]): Buffer {
  // To a node of an older version (its hello named no link), in the form it reads: it hears why it is refused.
  return serialize(link === '' ? [from, frame] : [from, frame, link])
}

/** Longer ids are no link's: a link's id is a UUID. */
const MAX_LINK_ID = 64

/** The sender, the frame and the link, or why the bytes are no envelope. A sender of an older version sends no link (its hello is refused for its version). */
export function decode(bytes: Buffer): { from: string; link: string; frame: unknown } | Error {
  // Read before it is decoded, as a process's pipe frame is: decoding costs the reader's loop.
  if (bytes.length > RUNNER_BOUNDS.pipeFrameBytes) return subagentError('ERR_SUBAGENT_REMOTE_SHAPE', `an envelope of ${bytes.length} bytes (at most ${RUNNER_BOUNDS.pipeFrameBytes})`)
  try {
    const envelope: unknown = deserialize(bytes)
    if (!Array.isArray(envelope) || (envelope.length !== 2 && envelope.length !== 3) || typeof envelope[0] !== 'string') return subagentError('ERR_SUBAGENT_REMOTE_SHAPE', 'not a [sender, frame, link] envelope')
    const link: unknown = envelope.length === 2 ? '' : envelope[2]
    if (typeof link !== 'string' || link.length > MAX_LINK_ID) return subagentError('ERR_SUBAGENT_REMOTE_SHAPE', `the envelope's link is not an id of at most ${MAX_LINK_ID} characters`)
    return { from: envelope[0], link, frame: envelope[1] }
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error))
  }
}

export type CreateMessage = Extract<HostMessage, { type: 'create' }>
export type { ChildJob, RoomMessage, TakeMessage }

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

/** A node's placement messages (its takes and its room), which the host's transport answers. */
export interface Placements {
  readonly takes: readonly TakeMessage[]
  readonly rooms: readonly RoomMessage[]
}

const NONE: Placements = { takes: [], rooms: [] }

/** A message's type, unchecked: a runner message is checked by the channel, so only the two placement types are checked here. */
const typeOf = (message: unknown) => (typeof message === 'object' && message !== null ? (message as { type?: unknown }).type : undefined)
const isPlacement = (message: unknown) => typeOf(message) === 'take' || typeOf(message) === 'room'

/**
 * A frame's placement messages apart from its runner messages (which the channel checks as it
 * would a thread's). Most frames have none: they are passed on as they came, nothing copied. A
 * frame longer than one may be is not looked into (a sparse array's length alone would make the
 * look cost the host's loop): it goes on whole, and the channel refuses it for its length.
 */
export function placementsOf(frame: unknown): Placements & { rest: unknown } {
  if (!Array.isArray(frame) || frame.length > RUNNER_BOUNDS.frameMessages || !frame.some(isPlacement)) return { ...NONE, rest: frame }
  const takes: TakeMessage[] = []
  const rooms: RoomMessage[] = []
  const rest: unknown[] = []
  for (const message of frame) {
    if (typeOf(message) === 'take' && isTakeMessage(message)) takes.push(message)
    else if (typeOf(message) === 'room' && isRoomMessage(message)) rooms.push(message)
    else rest.push(message)
  }
  return { takes, rooms, rest: rest.length === frame.length ? frame : rest }
}
