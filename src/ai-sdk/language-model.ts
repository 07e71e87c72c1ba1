/**
 * The AI SDK language model, typed by shape: `@ai-sdk/provider` is never imported, so any
 * provider's model instance (LanguageModelV2 of `ai` 5, V3 of `ai` 6, V4 of `ai` 7, a mock) fits.
 * Only what `fromLanguageModel` sends and reads is named; everything read is checked at run time.
 */

/** The subset of a prompt every spec accepts alike (v3 and v4 only add parts this library never sends). */
export type PromptMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: PromptText[] }
  | { role: 'assistant'; content: Array<PromptText | PromptToolCall> }
  | { role: 'tool'; content: PromptToolResult[] }

export interface PromptText {
  type: 'text'
  text: string
}

export interface PromptToolCall {
  type: 'tool-call'
  toolCallId: string
  toolName: string
  /** The parsed arguments (the raw text when they were not valid JSON). */
  input: unknown
}

export interface PromptToolResult {
  type: 'tool-result'
  toolCallId: string
  toolName: string
  output: { type: 'text' | 'error-text'; value: string }
}

export interface FunctionTool {
  type: 'function'
  name: string
  description: string
  inputSchema: Record<string, unknown>
}

/** What `fromLanguageModel` passes to `doStream`. */
export interface CallOptions {
  prompt: PromptMessage[]
  tools?: FunctionTool[]
  maxOutputTokens?: number
  abortSignal: AbortSignal
}

/** A stream part of any spec; its fields are checked when read. */
export interface StreamPartLike {
  readonly type: string
}

/** Any AI SDK language model instance of spec v2 (`ai` 5), v3 (`ai` 6) or v4 (`ai` 7). */
export interface LanguageModelLike {
  readonly specificationVersion: 'v2' | 'v3' | 'v4'
  readonly provider: string
  readonly modelId: string
  // A method, so provider models whose options type is wider than ours still fit.
  doStream(options: CallOptions): PromiseLike<{ stream: ReadableStream<StreamPartLike> }>
}
