/**
 * Sessions: a header and an append-only list of events. The host keeps a mirror of every child's
 * session (built from streamed events), so these shapes are what crosses the thread boundary.
 */
import type { ContentBlock } from './content.js'
import { closed, union } from './schema.js'

export interface SessionHeader {
  id: string
  createdAt: string
  parentSession?: string
  origin?: 'subagent'
  /** Durable delegation depth: authoritative over runtime options, survives persistence. */
  delegationDepth?: number
  /** Number of leading events copied from the parent by a fork. */
  seedLength?: number
  cwd?: string
}

export interface Usage {
  inputTokens: number
  outputTokens: number
}

export type TurnEndReason =
  | { kind: 'completed' }
  | { kind: 'max-tokens' }
  | { kind: 'blocked'; message: string }
  | { kind: 'aborted'; reason: unknown }
  | { kind: 'error'; message: string }

export interface ToolResultData {
  callId: string
  name: string
  isError: boolean
  code?: ToolErrorCode
  content: ContentBlock[]
  value?: unknown
}

export type ToolErrorCode = 'UNKNOWN_TOOL' | 'INVALID_ARGS' | 'FAILED' | 'DENIED' | 'ABORTED'

export interface SessionEventMap {
  'turn/start': Record<string, never>
  'user/message': { content: ContentBlock[]; source: { kind: string } }
  'assistant/chunk': { chunk: { type: 'text-delta'; text: string } }
  'assistant/message': { content: ContentBlock[]; usage?: Usage }
  'tool/result': ToolResultData
  'subagent/descriptor': { mode: 'one-shot'; provider: string; label?: string }
  'turn/end': { reason: TurnEndReason }
}

export type SessionEventType = keyof SessionEventMap

/** Any event; foreign parents may carry types this library does not know. */
export interface SessionEvent {
  seq: number
  type: string
  data: unknown
}

export interface EventOf<T extends SessionEventType> extends SessionEvent {
  type: T
  data: SessionEventMap[T]
}

export function isEvent<T extends SessionEventType>(event: SessionEvent, type: T): event is EventOf<T> {
  return event.type === type
}

const content = { type: 'array', items: { $ref: 'content-block' } } as const

function eventSchema(type: SessionEventType, data: object): object {
  return closed({ seq: { type: 'integer', minimum: 0 }, type: { const: type }, data })
}

export const sessionHeaderSchema = {
  $id: 'subagent-worker/session-header',
  ...closed(
    {
      id: { type: 'string', minLength: 1 },
      createdAt: { type: 'string' },
      parentSession: { type: 'string' },
      origin: { const: 'subagent' },
      delegationDepth: { type: 'integer', minimum: 0 },
      seedLength: { type: 'integer', minimum: 0 },
      cwd: { type: 'string' },
    },
    ['parentSession', 'origin', 'delegationDepth', 'seedLength', 'cwd'],
  ),
}

/** A known event, data checked per type. */
export const sessionEventSchema = union('subagent-worker/session-event', [
  eventSchema('turn/start', closed({})),
  eventSchema(
    'user/message',
    closed({ content, source: { type: 'object', properties: { kind: { type: 'string' } }, required: ['kind'] } }),
  ),
  eventSchema('assistant/chunk', closed({ chunk: closed({ type: { const: 'text-delta' }, text: { type: 'string' } }) })),
  eventSchema(
    'assistant/message',
    closed({ content, usage: closed({ inputTokens: { type: 'number' }, outputTokens: { type: 'number' } }) }, ['usage']),
  ),
  eventSchema(
    'tool/result',
    closed(
      {
        callId: { type: 'string' },
        name: { type: 'string' },
        isError: { type: 'boolean' },
        code: { enum: ['UNKNOWN_TOOL', 'INVALID_ARGS', 'FAILED', 'DENIED', 'ABORTED'] },
        content,
        value: {},
      },
      ['code', 'value'],
    ),
  ),
  eventSchema('subagent/descriptor', closed({ mode: { const: 'one-shot' }, provider: { type: 'string' }, label: { type: 'string' } }, ['label'])),
  eventSchema(
    'turn/end',
    closed({
      reason: closed({ kind: { enum: ['completed', 'max-tokens', 'blocked', 'aborted', 'error'] }, reason: {}, message: { type: 'string' } }, ['reason', 'message']),
    }),
  ),
])

/** Any event at all: the shape a foreign parent's seed must have. */
export const anySessionEventSchema = {
  $id: 'subagent-worker/any-session-event',
  type: 'object',
  properties: { seq: { type: 'number' }, type: { type: 'string' }, data: {} },
  required: ['seq', 'type'],
} as const
