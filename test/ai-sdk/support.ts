/**
 * Shared set-up for the AI SDK adapter tests: the SDK's own mock language models of every spec
 * (v2 from `ai` 5, v3 from `ai` 6, v4 from `ai` 7), stream parts and generate results written per
 * spec, and hosts closed after each file.
 */
import { fileURLToPath } from 'node:url'
import { MockLanguageModelV3, convertArrayToReadableStream as toStream6 } from 'ai/test'
import { MockLanguageModelV2, convertArrayToReadableStream as toStream5 } from 'ai5/test'
import { MockLanguageModelV4, convertArrayToReadableStream as toStream7 } from 'ai7/test'
import { createHost, type Host, type HostOptions } from 'subagent-worker'
import { hostOptions, type TransportName } from '../support/harness.js'

export const SPECS = ['v2', 'v3', 'v4'] as const
export type Spec = (typeof SPECS)[number]

export const AI_SDK_MODULE = fileURLToPath(new URL('../fixtures/ai-sdk-module.mjs', import.meta.url))

type V2Options = Parameters<MockLanguageModelV2['doStream']>[0]
type V3Options = Parameters<MockLanguageModelV3['doStream']>[0]
type V4Options = Parameters<MockLanguageModelV4['doStream']>[0]
type PartOf<M extends { doStream(options: never): PromiseLike<{ stream: ReadableStream<unknown> }> }> =
  Awaited<ReturnType<M['doStream']>>['stream'] extends ReadableStream<infer P> ? P : never
export type V2Part = PartOf<MockLanguageModelV2>
export type V3Part = PartOf<MockLanguageModelV3>
export type V4Part = PartOf<MockLanguageModelV4>
export type Part = V2Part | V3Part | V4Part
export type MockModel = MockLanguageModelV2 | MockLanguageModelV3 | MockLanguageModelV4

/** What a mock was called with, in the fields both specs share. */
export interface Call {
  prompt: Array<{ role: string; content: unknown }>
  tools?: Array<{ type: string; name: string; description?: string; inputSchema?: unknown }>
  maxOutputTokens?: number
  abortSignal?: AbortSignal
}

export type FinishName = 'stop' | 'length' | 'tool-calls' | 'content-filter' | 'error' | 'other' | 'unknown' | 'interrupted'

/** One model response, written once for both specs. */
export interface Reply {
  text?: string
  calls?: Array<{ id: string; name: string; input: unknown }>
  finish?: FinishName
  usage?: { input: number; output: number }
  /** Parts inserted before the finish (an error part, say). */
  extra?: Array<{ type: 'error'; error: unknown }>
  /** Leave the finish part out. */
  noFinish?: boolean
}

/** A doStream result of the spec: a stream, or a function of the call (for hangs and failures). */
export type StreamScript = Reply | ((call: Call) => Reply | Promise<{ stream: ReadableStream<Part> }>)

export function partsOf(spec: Spec, reply: Reply): Part[] {
  const parts: Part[] = []
  if (reply.text !== undefined) {
    parts.push({ type: 'text-start', id: 't1' }, { type: 'text-delta', id: 't1', delta: reply.text }, { type: 'text-end', id: 't1' })
  }
  for (const call of reply.calls ?? []) {
    const input = JSON.stringify(call.input)
    parts.push(
      { type: 'tool-input-start', id: call.id, toolName: call.name },
      { type: 'tool-input-delta', id: call.id, delta: input },
      { type: 'tool-input-end', id: call.id },
      { type: 'tool-call', toolCallId: call.id, toolName: call.name, input },
    )
  }
  for (const extra of reply.extra ?? []) parts.push(extra)
  if (!reply.noFinish) {
    const finish = reply.finish ?? (reply.calls?.length ? 'tool-calls' : 'stop')
    const { input, output } = reply.usage ?? { input: 10, output: 5 }
    parts.push(
      spec === 'v2'
        ? { type: 'finish', finishReason: finish as 'stop', usage: { inputTokens: input, outputTokens: output, totalTokens: input + output } }
        : {
            type: 'finish',
            finishReason: { unified: finish as 'stop', raw: `raw-${finish}` },
            usage: {
              inputTokens: { total: input, noCache: input, cacheRead: undefined, cacheWrite: undefined },
              outputTokens: { total: output, text: output, reasoning: undefined },
            },
          },
    )
  }
  return parts
}

export function streamOf(spec: Spec, parts: Part[]): ReadableStream<Part> {
  if (spec === 'v2') return toStream5(parts as V2Part[])
  return spec === 'v3' ? toStream6(parts as V3Part[]) : toStream7(parts as V4Part[])
}

/** A spec v3 stream of one reply, typed for MockLanguageModelV3. */
export function v3Stream(reply: Reply): ReadableStream<V3Part> {
  return toStream6(partsOf('v3', reply) as V3Part[])
}

/** A mock language model of `spec`; each doStream call takes the next script entry. */
export function mockModel(spec: Spec, script: StreamScript[]): MockModel {
  let index = 0
  const respond = async (call: Call): Promise<{ stream: ReadableStream<Part> }> => {
    const entry = script[index++]
    if (entry === undefined) throw new Error(`mock ${spec} model: no script entry for call ${index}`)
    const reply = typeof entry === 'function' ? await entry(call) : entry
    return 'stream' in reply ? reply : { stream: streamOf(spec, partsOf(spec, reply)) }
  }
  if (spec === 'v2') {
    return new MockLanguageModelV2({ doStream: async (options: V2Options) => (await respond(options as Call)) as { stream: ReadableStream<V2Part> } })
  }
  if (spec === 'v3') {
    return new MockLanguageModelV3({ doStream: async (options: V3Options) => (await respond(options as Call)) as { stream: ReadableStream<V3Part> } })
  }
  return new MockLanguageModelV4({ doStream: async (options: V4Options) => (await respond(options as Call)) as { stream: ReadableStream<V4Part> } })
}

export function callsOf(model: MockModel): Call[] {
  return model.doStreamCalls as Call[]
}

const open: Host[] = []

/** Fixture modules import `ai` and `zod`: a sandboxed child process must be let read them. */
const NODE_MODULES = fileURLToPath(new URL('../../node_modules', import.meta.url))

export function openHost(isolation: TransportName, options: Omit<HostOptions, 'isolation'> = {}): Host {
  const host = createHost({ ...hostOptions(isolation), ...(isolation === 'process' ? { sandbox: { fsRead: [NODE_MODULES] } } : {}), ...options })
  open.push(host)
  return host
}

export async function closeHosts(): Promise<void> {
  await Promise.all(open.splice(0).map((host) => host.close()))
}

