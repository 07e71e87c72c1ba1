/**
 * Sessions: a header and an append-only list of events. The host keeps a mirror of every child's
 * session (built from streamed events), so these shapes are what crosses the thread boundary.
 */
import type { ContentBlock } from './content.js'
import { union } from './schema.js'

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

function eventSchema(type: SessionEventType, data: object) {
  return {
    type: 'object',
    properties: { seq: { type: 'integer', minimum: 0 }, type: { const: type }, data },
    required: ['seq', 'type', 'data'],
    additionalProperties: false,
  } as const
}

export const sessionHeaderSchema = {
  $id: 'subagent-worker/session-header',
  type: 'object',
  properties: {
    id: { type: 'string', minLength: 1 },
    createdAt: { type: 'string' },
    parentSession: { type: 'string' },
    origin: { const: 'subagent' },
    delegationDepth: { type: 'integer', minimum: 0 },
    seedLength: { type: 'integer', minimum: 0 },
    cwd: { type: 'string' },
  },
  required: ['id', 'createdAt'],
  additionalProperties: false,
} as const

/** A known event, data checked per type. */
export const sessionEventSchema = union('subagent-worker/session-event', [
  eventSchema('turn/start', { type: 'object', additionalProperties: false }),
  eventSchema('user/message', {
    type: 'object',
    properties: {
      content,
      source: { type: 'object', properties: { kind: { type: 'string' } }, required: ['kind'] },
    },
    required: ['content', 'source'],
    additionalProperties: false,
  }),
  eventSchema('assistant/chunk', {
    type: 'object',
    properties: {
      chunk: {
        type: 'object',
        properties: { type: { const: 'text-delta' }, text: { type: 'string' } },
        required: ['type', 'text'],
        additionalProperties: false,
      },
    },
    required: ['chunk'],
    additionalProperties: false,
  }),
  eventSchema('assistant/message', {
    type: 'object',
    properties: {
      content,
      usage: {
        type: 'object',
        properties: { inputTokens: { type: 'number' }, outputTokens: { type: 'number' } },
        required: ['inputTokens', 'outputTokens'],
        additionalProperties: false,
      },
    },
    required: ['content'],
    additionalProperties: false,
  }),
  eventSchema('tool/result', {
    type: 'object',
    properties: {
      callId: { type: 'string' },
      name: { type: 'string' },
      isError: { type: 'boolean' },
      code: { enum: ['UNKNOWN_TOOL', 'INVALID_ARGS', 'FAILED', 'DENIED', 'ABORTED'] },
      content,
      value: {},
    },
    required: ['callId', 'name', 'isError', 'content'],
    additionalProperties: false,
  }),
  eventSchema('subagent/descriptor', {
    type: 'object',
    properties: { mode: { const: 'one-shot' }, provider: { type: 'string' }, label: { type: 'string' } },
    required: ['mode', 'provider'],
    additionalProperties: false,
  }),
  eventSchema('turn/end', {
    type: 'object',
    properties: {
      reason: {
        type: 'object',
        properties: {
          kind: { enum: ['completed', 'max-tokens', 'blocked', 'aborted', 'error'] },
          reason: {},
          message: { type: 'string' },
        },
        required: ['kind'],
        additionalProperties: false,
      },
    },
    required: ['reason'],
    additionalProperties: false,
  }),
])

/** Any event at all: the shape a foreign parent's seed must have. */
export const anySessionEventSchema = {
  $id: 'subagent-worker/any-session-event',
  type: 'object',
  properties: { seq: { type: 'number' }, type: { type: 'string' }, data: {} },
  required: ['seq', 'type'],
} as const
