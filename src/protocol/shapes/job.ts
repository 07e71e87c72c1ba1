/**
 * The shapes of placement, besides frames: the job that waits in a queue for a node, the node's
 * take of it, and the room a node tells the hosts it is linked to. Each is read by the side that
 * did not write it, so each is checked there (`isChildJob` on the node, `isTakeMessage` and
 * `isRoomMessage` on the host).
 */
import { count, variant, type Wire } from '../schema.js'

const id = { type: 'string', minLength: 1 } as const

/**
 * A child job names one child and the host to ask for it, nothing more: whoever can write to the
 * broker can edit a job, so what the child is (its spec, tools, persona) never rides in it. The
 * node that takes the job asks the host for the child with a `take`, and the host answers with
 * the `create` over the link. Open, not closed: fields someone added are ignored, not obeyed.
 */
export const ChildJob = { type: 'object', properties: { v: count, host: id, child: id }, required: ['v', 'host', 'child'] } as const
export type ChildJob = Wire<typeof ChildJob>

/**
 * Node → host, its first word about a job it took: the child the job names and the job's lock
 * token, which the broker gave only the node it handed the job to. The host gives the child to
 * the first node whose token matches the job's lock. Not a runner message: it is answered by the
 * host's transport (with the `create`, or a `drop`), before the child is on any channel.
 */
export const TakeMessage = variant('take', { child: id, token: id })
export type TakeMessage = Wire<typeof TakeMessage>

/** The most a node tells a host it has room for, at one level: more is not believed. */
export const MAX_ROOM = 100_000

/**
 * Node → host: how many more children of one depth level (1 for the first; the broker's deeper
 * depths share its last level) this node would take now (`free`), and how many children this host
 * placed on it at that level it had received when it counted (`placed`). The host places a child
 * directly on a node with room, with an unasked `create`, and queues it only when no node has
 * any; the count lets it subtract the placements still on their way. Not a runner message:
 * the host's transport reads it, as it does a take.
 */
export const RoomMessage = variant('room', {
  level: { type: 'integer', minimum: 1, maximum: 1000 },
  free: { type: 'integer', minimum: 0, maximum: MAX_ROOM },
  placed: count,
})
export type RoomMessage = Wire<typeof RoomMessage>
