// subagent-worker/ai-sdk: the library with the Vercel AI SDK (`ai` 5, 6 or 7). Re-exports only.
export { fromLanguageModel, type FromLanguageModelOptions } from './from-language-model.js'
export type { LanguageModelLike, CallOptions, PromptMessage, StreamPartLike } from './language-model.js'
export { delegationTool, type DelegationToolConfig, type DelegationInput, type StructuredDelegationInput, type StructuredOf } from './delegation-tool.js'
export { jobTools, type JobToolName } from './job-tools.js'
export { parentFromMessages, type AiSdkModelMessage, type MessagePart, type ForeignParentInit } from './parent-from-messages.js'
