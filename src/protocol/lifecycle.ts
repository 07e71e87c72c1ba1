/**
 * Lifecycle messages between the host and the side that runs a child. Transport-neutral: they
 * travel over anything that carries structured-clone data in order (a MessagePort today).
 *
 *   host → child side: create (the task), publish (with the prompt: run it) | rollback, abort,
 *                      dispose, rpc replies (streamed chunks batched)
 *   child side → host: created | create-failed, events (batched), idle (with the last events),
 *                      rpc calls
 *
 * A one-shot child's side closes the channel itself after `idle`: nothing more can happen.
 * Fewer crossings matter more than smaller messages: waking a sleeping thread costs far more than
 * the bytes.
 */
import type { ContentBlock } from './content.js'
import type { SessionEvent, SessionHeader } from './session.js'
import { closed, union, variant } from './schema.js'
import type { StreamChunk } from './stream.js'

export const PROTOCOL_VERSION = 1

/** A plain, cloneable error. */
export interface WireError {
  name: string
  message: string
  code?: string
}

/** What a worker child needs to call a host tool as if it were local. */
export interface RemoteToolDescriptor {
  name: string
  description: string
  parameters: object
  needsApproval?: boolean
  concurrencySafe?: boolean
}

export interface AgentOptions {
  /** Name of the registered model (host or agent module) the agent talks to. */
  provider?: string
  /** Model id passed in each request. */
  model?: string
  maxTokens?: number
  subagentDepth?: number
}

export interface ToolFilter {
  allow?: string[]
  deny?: string[]
}

export interface ChildDescriptor {
  mode: 'one-shot'
  provider: string
  label?: string
}

/** Everything needed to build a child: plain data, so either transport can carry it. */
export interface ChildSpec {
  id: string
  header: SessionHeader
  options: AgentOptions
  /** The fork seed (empty for spawn). */
  seed: SessionEvent[]
  /** Shadows the deployment persona for this child only. */
  persona?: string
  toolFilter?: ToolFilter
  outputSchema?: object
  descriptor: ChildDescriptor
}

/** The create request: everything the far side needs to build the child, validated there. */
export interface CreateRequest {
  v: number
  type: 'create'
  spec: ChildSpec
  agentModule?: string
  persona?: string
  maxParallelToolCalls: number
  hostModels: string[]
  hostTools: RemoteToolDescriptor[]
}

export type RpcTarget = 'model' | 'tool'

export type HostMessage =
  | { type: 'publish'; prompt: ContentBlock[] }
  | { type: 'rollback' }
  | { type: 'abort'; reason: unknown }
  | { type: 'dispose' }
  | { type: 'rpc/chunk'; id: number; chunks: StreamChunk[] }
  | { type: 'rpc/result'; id: number; value?: unknown; chunks?: StreamChunk[] }
  | { type: 'rpc/error'; id: number; error: WireError }

export type ChildMessage =
  | { type: 'created'; threadId: number }
  | { type: 'create-failed'; error: WireError }
  | { type: 'events'; events: SessionEvent[] }
  | { type: 'idle'; events?: SessionEvent[]; structured?: { value: unknown } }
  | { type: 'rpc/call'; id: number; target: RpcTarget; name: string; payload: unknown }
  | { type: 'rpc/abort'; id: number; reason: unknown }

const wireError = closed({ name: { type: 'string' }, message: { type: 'string' }, code: { type: 'string' } }, ['code'])
const rpcId = { type: 'integer', minimum: 1 } as const
const events = { type: 'array', minItems: 1, items: { $ref: 'session-event' } } as const
const chunks = { type: 'array', minItems: 1, items: { $ref: 'stream-chunk' } } as const

export const createRequestSchema = {
  $id: 'subagent-worker/create-request',
  type: 'object',
  properties: {
    v: { type: 'integer' },
    type: { const: 'create' },
    spec: {
      type: 'object',
      properties: {
        id: { type: 'string', minLength: 1 },
        header: { $ref: 'session-header' },
        options: {
          type: 'object',
          properties: {
            provider: { type: 'string' },
            model: { type: 'string' },
            maxTokens: { type: 'integer', minimum: 1 },
            subagentDepth: { type: 'integer', minimum: 0 },
          },
          additionalProperties: false,
        },
        seed: { type: 'array', items: { $ref: 'any-session-event' } },
        persona: { type: 'string' },
        toolFilter: {
          type: 'object',
          properties: { allow: { type: 'array', items: { type: 'string' } }, deny: { type: 'array', items: { type: 'string' } } },
          additionalProperties: false,
        },
        outputSchema: { type: 'object' },
        descriptor: {
          type: 'object',
          properties: { mode: { const: 'one-shot' }, provider: { type: 'string' }, label: { type: 'string' } },
          required: ['mode', 'provider'],
          additionalProperties: false,
        },
      },
      required: ['id', 'header', 'options', 'seed', 'descriptor'],
      additionalProperties: false,
    },
    agentModule: { type: 'string' },
    persona: { type: 'string' },
    maxParallelToolCalls: { type: 'integer', minimum: 1 },
    hostModels: { type: 'array', items: { type: 'string' } },
    hostTools: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          name: { type: 'string' },
          description: { type: 'string' },
          parameters: { type: 'object' },
          needsApproval: { type: 'boolean' },
          concurrencySafe: { type: 'boolean' },
        },
        required: ['name', 'description', 'parameters'],
        additionalProperties: false,
      },
    },
  },
  required: ['v', 'type', 'spec', 'maxParallelToolCalls', 'hostModels', 'hostTools'],
  additionalProperties: false,
} as const

export const hostMessageSchema = union('subagent-worker/host-message', [
  variant('publish', { prompt: { type: 'array', items: { $ref: 'content-block' } } }),
  variant('rollback'),
  variant('abort', { reason: {} }),
  variant('dispose'),
  variant('rpc/chunk', { id: rpcId, chunks }),
  variant('rpc/result', { id: rpcId, value: {}, chunks }, ['value', 'chunks']),
  variant('rpc/error', { id: rpcId, error: wireError }),
])

export const childMessageSchema = union('subagent-worker/child-message', [
  variant('created', { threadId: { type: 'integer', minimum: 0 } }),
  variant('create-failed', { error: wireError }),
  variant('events', { events }),
  variant('idle', { events, structured: { type: 'object', properties: { value: {} }, additionalProperties: false } }, ['events', 'structured']),
  variant('rpc/call', { id: rpcId, target: { enum: ['model', 'tool'] }, name: { type: 'string' }, payload: {} }),
  variant('rpc/abort', { id: rpcId, reason: {} }),
])

export function toWireError(error: unknown): WireError {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code
    return typeof code === 'string' ? { name: error.name, message: error.message, code } : { name: error.name, message: error.message }
  }
  return { name: 'Error', message: messageOf(error) }
}

export function fromWireError(wire: WireError): Error {
  const error = new Error(wire.message)
  error.name = wire.name
  if (wire.code !== undefined) (error as Error & { code?: string }).code = wire.code
  return error
}

/** A structured clone of the value, or undefined when it cannot cross a thread boundary. */
export function tryClone(value: unknown): { value: unknown } | undefined {
  try {
    return { value: structuredClone(value) }
  } catch {
    return undefined
  }
}

/** A cancel reason that survives structured clone; an uncloneable one is described instead. */
export function cloneableReason(reason: unknown): unknown {
  return tryClone(reason)?.value ?? { kind: 'uncloneable', description: describeValue(reason) }
}

/** JSON where possible, never throwing (cycles, BigInt). */
function describeValue(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

/**
 * Names a bad message or chunk by its `type` alone: its payload may hold tool inputs or
 * credentials, and this text can end up in a diagnostic.
 */
export function describeShape(value: unknown): string {
  const type = (value as { type?: unknown } | null)?.type
  return typeof type === 'string' ? `of type ${JSON.stringify(type.slice(0, 40))}` : `(${value === null ? 'null' : typeof value})`
}

export function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message
  return typeof error === 'string' ? error : describeValue(error)
}
