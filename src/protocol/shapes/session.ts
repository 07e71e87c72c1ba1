/**
 * Sessions: a header and an append-only list of events. The host keeps a mirror of every child's
 * session (built from streamed events), so these shapes are what crosses the thread boundary.
 */
import { contentBlocks, type ContentBlockSchema } from './content.js'
import { anything, boolean, closed, count, number, string, union, variant, type JSONSchema, type Wire } from '../schema.js'
import { share } from '../validate.js'

/** Positive safe integers (CONTRACT.md §11); in a header, the child's effective limits. */
const limit = { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER } as const
export const ChildLimits = closed({ timeoutMs: limit, maxSteps: limit, maxTotalTokens: limit }, ['timeoutMs', 'maxSteps', 'maxTotalTokens'])
export type ChildLimits = Wire<typeof ChildLimits>

/**
 * A session's first record. `type` tells it from the events in a transcript (the library always
 * writes it; stores fill it in on a header written before it existed); `provider` and `model`
 * let `resumeAgent(id)` alone bring an agent back with its model.
 */
export const SessionHeader = closed(
  {
    type: { const: 'session' },
    id: { type: 'string', minLength: 1 },
    createdAt: string,
    parentSession: string,
    origin: { const: 'subagent' },
    /** Durable delegation depth: authoritative over runtime options, survives persistence. */
    delegationDepth: count,
    /** Number of leading events copied from the parent by a fork. */
    seedLength: count,
    cwd: string,
    /** The agent's model, by its registered name and its model id, when it had one. */
    provider: string,
    model: string,
    /** A child's label, as its parent gave it. */
    label: string,
    /** Which provider started a child. */
    providerKind: { enum: ['spawn', 'fork'] },
    /** The effective limits (never wider than its parent's): a resumed agent keeps them. */
    limits: ChildLimits,
  },
  // `type` is optional so any parent's header will do (CONTRACT: any object of the right shape).
  ['type', 'parentSession', 'origin', 'delegationDepth', 'seedLength', 'cwd', 'provider', 'model', 'label', 'providerKind', 'limits'],
)
export type SessionHeader = Wire<typeof SessionHeader>

/** Counts no model reports below zero (a usage chunk's are checked the same way): a forged negative one is refused where it crosses. */
const tokens = { type: 'number', minimum: 0 } as const
export const Usage = closed({ inputTokens: tokens, outputTokens: tokens })
export type Usage = Wire<typeof Usage>

export const TurnEndReason = union(
  [
    closed({ kind: { const: 'completed' } }),
    closed({ kind: { const: 'max-tokens' } }),
    closed({ kind: { const: 'blocked' }, message: string }),
    closed({ kind: { const: 'aborted' }, reason: anything }, ['reason']),
    closed({ kind: { const: 'error' }, message: string }),
  ],
  'kind',
)
export type TurnEndReason = Wire<typeof TurnEndReason>

export const ToolErrorCode = { enum: ['UNKNOWN_TOOL', 'INVALID_ARGS', 'FAILED', 'DENIED', 'ABORTED'] } as const
export type ToolErrorCode = Wire<typeof ToolErrorCode>

export const ToolResultData = closed(
  { callId: string, name: string, isError: boolean, code: ToolErrorCode, content: contentBlocks, value: anything },
  ['code', 'value'],
)
export type ToolResultData = Wire<typeof ToolResultData, [ContentBlockSchema]>

/** How a child was started, recorded as its `subagent/descriptor` event. */
export const ChildDescriptor = closed({ mode: { enum: ['one-shot', 'continuable'] }, provider: string, label: string }, ['label'])
export type ChildDescriptor = Wire<typeof ChildDescriptor>
/** 'one-shot', or 'continuable': a child that takes more work (CONTRACT.md §13). */
export type ChildMode = ChildDescriptor['mode']

const event = <const T extends string, const D extends JSONSchema>(type: T, data: D) => variant(type, { seq: count, data })

/** A known event, data checked per type: what a child may stream back. */
export const KnownSessionEvent = {
  $id: 'urn:subagent-worker:session-event',
  ...union([
    event('turn/start', closed({})),
    event('user/message', closed({ content: contentBlocks, source: { type: 'object', properties: { kind: string }, required: ['kind'] } })),
    event('assistant/chunk', closed({ chunk: closed({ type: { const: 'text-delta' }, text: string }) })),
    event('assistant/message', closed({ content: contentBlocks, usage: Usage }, ['usage'])),
    event('tool/result', ToolResultData),
    event('subagent/descriptor', ChildDescriptor),
    event('turn/end', closed({ reason: TurnEndReason })),
    /** The host rebuilt the child on another runner (CONTRACT.md §8); only the host records it, never a runner. */
    event('child/moved', closed({ reason: string })),
  ]),
} as const
share(KnownSessionEvent)
export type KnownSessionEventSchema = typeof KnownSessionEvent
export type KnownSessionEvent = Wire<KnownSessionEventSchema, [ContentBlockSchema]>

export type SessionEventMap = { [E in KnownSessionEvent as E['type']]: E['data'] }
export type SessionEventType = keyof SessionEventMap

/**
 * A session event, discriminated by `type`: narrowing on `type` types `data`
 * (`if (e.type === 'assistant/chunk') e.data.chunk.text`). Derived from the wire schema above, so
 * the type and the runtime check cannot drift apart.
 */
export type SessionEvent = KnownSessionEvent
/** What a foreign parent's event must have to be forked: a numeric seq and a string type. */
export const SessionEvent = { type: 'object', properties: { seq: number, type: string }, required: ['seq', 'type'] } as const

export type EventOf<T extends SessionEventType> = Extract<SessionEvent, { type: T }>

export function isEvent<T extends SessionEventType>(event: SessionEvent, type: T): event is EventOf<T> {
  return event.type === type
}
