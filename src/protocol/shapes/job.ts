/**
 * The two shapes that cross a broker besides frames: the job that waits in a queue for a node,
 * and the node's take of it. Both are read by the side that did not write them, so both are
 * checked there (`isChildJob` on the node, `isTakeMessage` on the host).
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
