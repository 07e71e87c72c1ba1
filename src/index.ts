// The public surface (DESIGN.md): re-exports only.
export { createHost, type Host, type HostOptions, type AgentInit } from './parent/host/host.js'
export type { Transport } from './parent/transport.js'
export type { SandboxOptions } from './parent/runners/endpoints/sandbox.js'
export type { SubagentProvider, HostProvider, SubagentRun, SubagentResult, SubagentStartRequest, SubagentStopReason, StructuredOf, PoolOptions, ContinuableRun, ContinuableStartRequest, Settlement } from './parent/types.js'
export { SubagentDepthError } from './parent/driver/depth.js'
export { InvalidOptionError } from './parent/options.js'
export { createMemoryStore, SessionLiveError, type MemoryStoreOptions, type SessionStore, type SessionFilter, type SessionList } from './parent/driver/stores/store.js'
export { createNdjsonStore } from './parent/driver/stores/ndjson-store.js'
export type { LifecycleEvents, SubagentStartEvent, SubagentEndEvent, SubagentEventInfo } from './parent/driver/lifecycle.js'
export type { ChildInfo, ChildStartMessage, ChildEndMessage, StepMessage, ToolMessage } from './parent/driver/watch/diagnostics.js'
export { truncateDiagnostic } from './parent/driver/result.js'
export { createSubagentTool, type SubagentArgs, type SubagentToolConfig, type ForegroundValue, type BackgroundValue, type ContinuableValue } from './parent/tools/subagent-tool.js'
export { createSendMessageTool, type SendMessageArgs, type MessageSentValue } from './parent/tools/send-message-tool.js'
export { createJobTools } from './parent/tools/job-tools.js'
export type { JobRegistry, JobInfo, JobStatus } from './parent/driver/jobs.js'

export type { Agent, AgentOptions, AgentView, TurnOutcome } from './agent/view.js'
export { DEFAULT_MAX_STEPS } from './agent/loop.js'
export type { LimitReason } from './agent/limit-stop.js'
export type { ChildLimits } from './parent/driver/limits.js'
export type { Model, ModelMessage, ModelRequest, ToolSchema } from './agent/models/model.js'
export { OpenAICompatibleModel, type OpenAICompatibleOptions } from './agent/models/openai.js'
export { ScriptedModel, textResponse, maxTokensResponse, refusalResponse, toolCallResponse, toolCallsResponse, type ScriptEntry } from './agent/models/scripted.js'
export { defineTool, ToolError, type ArgsOf, type ToolDefinition, type ToolExecution, type ToolFilter, type ToolInput } from './agent/tools/tools.js'
export { defineAgentModule, type AgentHooks, type AgentModule, type ToolCallInfo, type ToolResult } from './agent/module.js'
export { SCHEMA_LIMITS, UnsupportedSchemaError } from './agent/tools/schema.js'
export { toJsonSchema, type JsonSchema, type SchemaLike, type ToJsonSchemaOptions } from './agent/tools/to-json-schema.js'
export {
  STRUCTURED_OUTPUT_TOOL,
  STRUCTURED_OUTPUT_DESCRIPTION,
  STRUCTURED_OUTPUT_INSTRUCTION,
  STRUCTURED_OUTPUT_ACK,
} from './agent/tools/structured.js'

export type {
  ContentBlock,
  TextBlock,
  ToolCallBlock,
  SessionHeader,
  SessionEvent,
  SessionEventMap,
  SessionEventType,
  EventOf,
  TurnEndReason,
  ToolResultData,
  ToolErrorCode,
  Usage,
  StreamChunk,
  FinishReason,
} from './protocol/index.js'
export { isEvent, ProtocolError, textOf } from './protocol/index.js'
