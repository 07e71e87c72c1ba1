/**
 * Parents written with the AI SDK itself: the real `generateText` of `ai` 5 (a spec v2 mock
 * model), of `ai` 6 (a spec v3 mock model) and of `ai` 7 (a spec v4 mock model), so each test can
 * run against every supported version.
 */
import { generateText as generateText6, stepCountIs as stepCountIs6, type ModelMessage, type ToolSet } from 'ai'
import { MockLanguageModelV3 } from 'ai/test'
import { generateText as generateText5, stepCountIs as stepCountIs5, type ToolSet as ToolSet5 } from 'ai5'
import { MockLanguageModelV2 } from 'ai5/test'
import { generateText as generateText7, stepCountIs as stepCountIs7, type ToolSet as ToolSet7 } from 'ai7'
import { MockLanguageModelV4 } from 'ai7/test'

export const VERSIONS = ['ai 5', 'ai 6', 'ai 7'] as const
export type Version = (typeof VERSIONS)[number]

/** One response of the parent's model; a function sees the prompt so far. */
export type ParentStep = { calls?: Array<{ id: string; name: string; input: unknown }>; text?: string }
export type ParentScript = Array<ParentStep | ((prompt: PromptMessage[]) => ParentStep)>

/** A prompt message as both specs record it, in the fields the tests read. */
export interface PromptMessage {
  role: string
  content: string | Array<{ type: string; output?: { type: string; value?: unknown }; [key: string]: unknown }>
}

export interface ParentRun {
  text: string
  /** Each tool outcome, in order: its output, or the message of the error the AI SDK recorded. */
  outcomes: Array<{ output: unknown } | { error: string }>
  /** Each prompt the parent's model was given. */
  prompts: PromptMessage[][]
}

export interface GenerateOptions {
  prompt?: string
  messages?: ModelMessage[]
  tools: ToolSet
  abortSignal?: AbortSignal
}

export async function generate(version: Version, script: ParentScript, options: GenerateOptions): Promise<ParentRun> {
  let step = 0
  const next = (prompt: PromptMessage[]): ParentStep => {
    const entry = script[step++]
    if (entry === undefined) throw new Error(`the parent's mock model has no step ${step}`)
    return typeof entry === 'function' ? entry(prompt) : entry
  }
  const content = (reply: ParentStep) => [
    ...(reply.text === undefined ? [] : [{ type: 'text' as const, text: reply.text }]),
    ...(reply.calls ?? []).map((call) => ({ type: 'tool-call' as const, toolCallId: call.id, toolName: call.name, input: JSON.stringify(call.input) })),
  ]
  const request = { ...(options.prompt === undefined ? {} : { prompt: options.prompt }), ...(options.messages === undefined ? {} : { messages: options.messages }) }

  if (version === 'ai 6') {
    const model = new MockLanguageModelV3({
      doGenerate: async ({ prompt }) => {
        const reply = next(prompt as PromptMessage[])
        const finish = reply.calls?.length ? 'tool-calls' : 'stop'
        return {
          content: content(reply),
          finishReason: { unified: finish, raw: undefined },
          usage: { inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 1, text: 1, reasoning: undefined } },
          warnings: [],
        }
      },
    })
    const result = await generateText6({ model, ...(request as { prompt: string }), tools: options.tools, stopWhen: stepCountIs6(6), ...abort(options) })
    return { text: result.text, outcomes: outcomesOf(result.steps), prompts: model.doGenerateCalls.map((call) => call.prompt as PromptMessage[]) }
  }
  if (version === 'ai 7') {
    const model = new MockLanguageModelV4({
      doGenerate: async ({ prompt }) => {
        const reply = next(prompt as PromptMessage[])
        const finish = reply.calls?.length ? 'tool-calls' : 'stop'
        return {
          content: content(reply),
          finishReason: { unified: finish, raw: undefined },
          usage: { inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 1, text: 1, reasoning: undefined } },
          warnings: [],
        }
      },
    })
    // As for ai 5 below: the adapter's tools carry ai 6's types, and one build serves every version.
    const tools = options.tools as unknown as ToolSet7
    const result = await generateText7({ model, ...(request as { prompt: string }), tools, stopWhen: stepCountIs7(6), ...abort(options) })
    return { text: result.text, outcomes: outcomesOf(result.steps), prompts: model.doGenerateCalls.map((call) => call.prompt as PromptMessage[]) }
  }
  const model = new MockLanguageModelV2({
    doGenerate: async ({ prompt }) => {
      const reply = next(prompt as PromptMessage[])
      return { content: content(reply), finishReason: reply.calls?.length ? 'tool-calls' : 'stop', usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 }, warnings: [] }
    },
  })
  // This repository installs `ai` 6 as `ai`, so the adapter's tools carry ai 6's types; an `ai` 5
  // user's `ai` is ai 5, and at run time one build serves both (what this test proves).
  const tools = options.tools as unknown as ToolSet5
  const result = await generateText5({ model, ...(request as { prompt: string }), tools, stopWhen: stepCountIs5(6), ...abort(options) })
  return { text: result.text, outcomes: outcomesOf(result.steps), prompts: model.doGenerateCalls.map((call) => call.prompt as PromptMessage[]) }
}

function abort(options: GenerateOptions): { abortSignal?: AbortSignal } {
  return options.abortSignal === undefined ? {} : { abortSignal: options.abortSignal }
}

function outcomesOf(steps: ReadonlyArray<{ content: ReadonlyArray<{ type: string; output?: unknown; error?: unknown }> }>): ParentRun['outcomes'] {
  return steps.flatMap((step) =>
    step.content.flatMap((part): ParentRun['outcomes'] => {
      if (part.type === 'tool-result') return [{ output: part.output }]
      if (part.type === 'tool-error') return [{ error: part.error instanceof Error ? part.error.message : String(part.error) }]
      return []
    }),
  )
}

/** What the parent's model was shown of the last tool result in `prompt`. */
export function lastToolOutput(prompt: PromptMessage[] | undefined): unknown {
  const tool = [...(prompt ?? [])].reverse().find((message) => message.role === 'tool')
  const parts = Array.isArray(tool?.content) ? tool.content : []
  return parts[parts.length - 1]?.output
}
