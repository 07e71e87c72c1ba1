/**
 * The frame protocol between the host and a runner (the side that runs children: a worker
 * thread, a child process, or a node that relays to its own threads). Wire-agnostic: a frame is an
 * array of messages, sent as one unit over anything that carries structured-clone data in order.
 * Children are multiplexed by id; each side sends at most one frame per event-loop turn (see
 * Outbox).
 *
 *   opening     runner → host `hello` {v}; host → runner `welcome` {v, config} first of all.
 *               Either side refuses a version it does not speak. The runner then loads the agent
 *               module and says `ready` (a node: once a thread of the host's module said it).
 *   a child     host: create → publish (or, for a moved child, continue); abort; notify (a
 *               settlement notice); drop (let go of a child that is not running, or that broke
 *               the protocol); rpc replies (a model call's chunks held until its result, or
 *               until any other reply or the abort goes; the host records each delta of a host
 *               model as the child's next event as it streams, and the runner as it receives
 *               it). To a node, a create answers its take, or places the child there directly on
 *               the room it told (see src/remote).
 *               runner: created | create-failed; events (and a frame's text chunks, of every
 *               child, in one `texts`; never a host model's, which the host recorded); rpc
 *               calls (the events still queued ride with a call); idle (the one-shot turn is
 *               over and the runner let the child go; the last events ride with it);
 *               dropped (after a drop); failed; ended
 *               (a node: the thread it ran on is gone, and why; a movable child waits there for
 *               the host's create or drop).
 *   liveness    host: ping {n}; runner: pong {n}.
 *   going down  runner: crashed {error}, when an uncaught error is about to end it (a runner
 *               whose host cannot see the error itself, such as a child process).
 *               host: bye, to a node: this host is done with it; let go of every child it placed.
 */
import { ChildSpec, RemoteToolDescriptor } from './shapes/child.js'
import { contentBlocks, type ContentBlockSchema } from './shapes/content.js'
import { WireError } from './shapes/error.js'
import { NoticeFields } from './shapes/notice.js'
import { ToolSchema } from './shapes/model.js'
import { RUNNER_BOUNDS } from './bounds.js'
import { RpcCallFields, RpcCancel, RpcChunks, RpcFailure, RpcReturn } from './rpc.js'
import { anything, arrayOf, boolean, closed, count, ref, string, union, variant, type Wire } from './schema.js'
import { KnownSessionEvent, type KnownSessionEventSchema, type SessionEvent } from './shapes/session.js'
import type { StreamChunkSchema } from './shapes/stream.js'
import { share } from './validate.js'
import { sideBySide } from './outbox.js'

/** Bumped whenever a message or the remote envelope (src/remote/envelope.ts) changes shape: both ends must speak the same version. */
export const PROTOCOL_VERSION = 22

const child = { type: 'string', minLength: 1 } as const
const version = count

/**
 * A recorded event as a runner's `events` and `idle` carry it: a streamed text chunk, by far the
 * commonest event, as its bare text, at the next seq; any other event whole. A structured clone
 * then carries one string where the chunk's event took four objects, on every chunk both ends.
 */
const wireEvents = { type: 'array', minItems: 1, items: { anyOf: [string, ref(KnownSessionEvent.$id)] } } as const
export type WireEvent = Wire<(typeof wireEvents)['items'], [ContentBlockSchema, KnownSessionEventSchema]>

export function toWire(event: SessionEvent): WireEvent {
  return event.type === 'assistant/chunk' ? event.data.chunk.text : event
}

/** The event a wire event stands for, `seq` the next in the child's record. */
export function fromWire(event: WireEvent, seq: number): SessionEvent {
  return typeof event === 'string' ? { seq, type: 'assistant/chunk', data: { chunk: { type: 'text-delta', text: event } } } : event
}

/** What every child on a runner shares, sent once when the channel opens. */
export const RunnerConfig = closed(
  {
    /** URL of the agent module every runner imports. */
    agentModule: string,
    maxParallelToolCalls: { type: 'integer', minimum: 1 },
    /** The host's cooperative-cancel budget: a node, which stops its own threads, enforces it. */
    abortGraceMs: count,
  },
  ['agentModule', 'abortGraceMs'],
)
export type RunnerConfig = Wire<typeof RunnerConfig>

/** How a child's run ended when its events cannot show it (its runner went under it): a node's `ended`, a transport's outcome. */
export const ChildFault = closed({ stopReason: { enum: ['error', 'aborted'] }, diagnostic: string })
export type ChildFault = Wire<typeof ChildFault>

export const HostMessage = {
  $id: 'urn:subagent-worker:host-message',
  ...union([
    variant('welcome', { v: version, config: RunnerConfig }),
    /** Builds a child: the spec, and the host-placed models and tools it may call (a snapshot). */
    variant('create', { child, spec: ChildSpec, hostModels: arrayOf(string), hostTools: arrayOf(RemoteToolDescriptor) }),
    /** The child was published: run its one turn with this prompt. */
    variant('publish', { child, prompt: contentBlocks }),
    /** A moved child, rebuilt from the host's copy of its session: go on with its open turn (`concluded`: a tool already concluded it). */
    variant('continue', { child, concluded: boolean }),
    variant('abort', { child, reason: anything }, ['reason']),
    /** A settlement notice for the child, a parent of continuable children: its next step records it (CONTRACT.md §13). */
    variant('notify', { child, ...NoticeFields }),
    /** Let go of a child: not yet running, or one the host gave up on. */
    variant('drop', { child }),
    RpcChunks,
    RpcReturn,
    RpcFailure,
    variant('ping', { n: count }),
    /** To a node, which holds children of many hosts: this host is gone for good (closed, or gave up on the node). */
    variant('bye', {}),
  ]),
} as const
export type HostMessageSchema = typeof HostMessage
export type HostMessage = Wire<HostMessageSchema, [ContentBlockSchema, StreamChunkSchema]>

export const RunnerMessage = {
  $id: 'urn:subagent-worker:runner-message',
  ...union([
    variant('hello', { v: version }),
    /** The runner cannot go on at all (say, a version it does not speak). */
    variant('fatal', { error: WireError }),
    /** An uncaught error is ending the runner: the cause its children's diagnostics name. */
    variant('crashed', { error: WireError }),
    /**
     * The agent module is loaded (or failed to load): the runner answers promptly from now on.
     * `hooks`: the module hooks it has, so the host knows when a child of it may be between steps
     * with no module code running. A node says it once a thread of the host's module did.
     * `tools`: the module's tool schemas, once: a model call names one by its index here.
     */
    variant(
      'ready',
      {
        hooks: { type: 'array', items: { enum: ['beforeStep', 'afterTool'] }, uniqueItems: true, maxItems: 2 },
        tools: { type: 'array', items: ToolSchema, maxItems: RUNNER_BOUNDS.moduleTools },
      },
      ['hooks', 'tools'],
    ),
    variant('created', { child }),
    variant('create-failed', { child, error: WireError }),
    variant('events', { child, events: wireEvents }),
    /**
     * The streamed text chunks of a frame's children, side by side (child, text, child, text ...):
     * each is that child's next event, as a bare text in its `events` is, with no message of its
     * own. A structured clone then carries two strings a chunk where it carried an object a child.
     */
    variant('texts', { texts: { type: 'array', minItems: 2, items: string } }),
    /** The turn is over and the runner let the child go; its last events ride with it when not sent yet. */
    variant('idle', { child, events: wireEvents, structured: closed({ value: anything }) }, ['events', 'structured']),
    variant('dropped', { child }),
    /**
     * The child's module model was asked for a step that recorded nothing before its turn ended (it
     * failed or was cancelled first): sent just before that turn's end, so the host publishes the
     * request it cannot see (its own models' requests it serves).
     */
    variant('requested', { child }),
    /** The runner had to give up on one child (a message of it could not be sent). */
    variant('failed', { child, error: WireError }),
    /**
     * A node's thread ended under the child (a crash, the grace running out): how it ended.
     * `movable`: for a fault its thread-mates survive (CONTRACT.md §8); the node holds the child
     * until the host rebuilds it there (a create) or lets it go (a drop).
     */
    variant('ended', { child, ...ChildFault.properties, movable: boolean }, ['movable']),
    /** A call into the host; the events the child recorded before it ride with it when not sent yet, as with `idle`. */
    variant('rpc/call', { ...RpcCallFields, events: wireEvents }, ['events']),
    RpcCancel,
    variant('pong', { n: count }),
  ]),
} as const
export type RunnerMessageSchema = typeof RunnerMessage
export type RunnerMessage = Wire<RunnerMessageSchema, [ContentBlockSchema, KnownSessionEventSchema]>

type TextsMessage = Extract<RunnerMessage, { type: 'texts' }>
/** The messages of a frame, as far as flatEvents reads them. */
type Relayed = { type: string; child?: string; events?: unknown[] }

/**
 * A frame with its text-only `events` messages side by side in one `texts`, at the first one's
 * place, each child's messages in their order: a node relays each of its threads' `texts` one
 * events message a child, which the host would clone and check an object each.
 */
export function flatEvents<M extends Relayed>(frame: M[]): Array<M | TextsMessage> {
  return sideBySide(frame, joinTextEvents, (texts: string[]): TextsMessage => ({ type: 'texts', texts }))
}

function joinTextEvents(message: Relayed, texts: string[]): boolean {
  const { events } = message
  if (message.type !== 'events' || !events!.every((event) => typeof event === 'string')) return false
  for (const text of events as string[]) texts.push(message.child!, text)
  return true
}

share(HostMessage, RunnerMessage)
export const HostFrame = { type: 'array', minItems: 1, items: ref(HostMessage.$id) } as const
export const RunnerFrame = { type: 'array', minItems: 1, items: ref(RunnerMessage.$id) } as const

/** The child a message is about, if any. */
export function childOf(message: unknown): string | undefined {
  const child = typeof message === 'object' && message !== null ? (message as { child?: unknown }).child : undefined
  return typeof child === 'string' ? child : undefined
}
