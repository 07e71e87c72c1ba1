/** The provider seam (DESIGN.md "Public surface") and the host's shared option types. */
import type { ResourceLimits } from 'node:worker_threads'
import type { Model } from '../agent/models/model.js'
import type { Infer } from '../agent/tools/infer.js'
import type { StopReason } from '../agent/outcome.js'
import type { LimitReason } from '../agent/limit-stop.js'
import type { ToolDefinition, ToolFilter } from '../agent/tools/tools.js'
import type { AgentOptions, AgentView } from '../agent/view.js'
import type { ContentBlock } from '../protocol/shapes/content.js'
import type { ChildLimits, SessionEvent, Usage } from '../protocol/shapes/session.js'

/** `S` is the type of `outputSchema`, which types the result's `structured`. */
export interface SubagentStartRequest<S extends object = object> {
  prompt: string | ContentBlock[]
  parent: AgentView
  /**
   * Covers both the creation transaction and the live run. Without one, a run is cancelled only
   * by `dispose()` or `host.close()`. Its reason, when the caller gave one, is the cancel reason
   * the child records, unchanged; a plain `abort()` records `{ kind: 'parent' }`.
   */
  signal?: AbortSignal
  label?: string
  agentOptions?: AgentOptions
  /** A JSON Schema, or a zod 4 or AI SDK schema (converted to JSON Schema on the host). */
  outputSchema?: S
  maxDepth?: number
  toolFilter?: ToolFilter
  persona?: string
  /**
   * CONTRACT.md §11: a deadline from publication, model requests per turn, and tokens for the
   * child and all its descendants. Never wider than the host's default or what its ancestors have left.
   */
  limits?: ChildLimits
}

export type SubagentStopReason = StopReason

/** The `structured` value an `outputSchema` describes; unknown when its type says nothing. */
export type StructuredOf<S> = Infer<S, unknown>

export interface SubagentResult<T = unknown> {
  output: ContentBlock[]
  /** The child's structured_output value (with `outputSchema`), typed from the schema where it can be. */
  structured?: T
  diagnostic?: string
  /** The token usage of the child's own steps, summed; absent when no step reported any. */
  usage?: Usage
  /**
   * The usage of the child's whole tree: its own `usage` plus every descendant's, summed from
   * what each session recorded (CONTRACT.md §12); absent when nothing in the tree reported any.
   */
  totalUsage?: Usage
  stopReason: SubagentStopReason
}

export interface SubagentRun<T = unknown> {
  /** The child's session id. */
  id: string
  /** Settles with the child's outcome; rejects only for an infrastructure fault. */
  result: Promise<SubagentResult<T>>
  /** Idempotent; rejects only when releasing the child failed. */
  dispose(): Promise<void>
  /** The same as `dispose()`, so `await using run = await provider.start(...)` works. */
  [Symbol.asyncDispose](): Promise<void>
  /**
   * The child's session events in seq order, from seq `from` (default 0): those recorded, then
   * each as it arrives; ends after the run has settled and its last event was yielded (§12).
   */
  events(options?: { from?: number }): AsyncIterable<SessionEvent>
}

export interface SubagentProvider {
  name: string
  capabilities: { outputSchema: boolean; depthLimit: boolean; toolFilter: boolean; persona: boolean }
  inheritsParentContext: boolean
  start(request: SubagentStartRequest): Promise<SubagentRun>
  /**
   * `start`, then `result`, then `dispose()`, resolving with the result. Rejects with the dispose
   * error when only releasing failed, with an AggregateError of both when the result failed too.
   */
  run(request: SubagentStartRequest): Promise<SubagentResult>
}

/** The host's own providers (`host.spawn`, `host.fork`): `structured` is typed from the request's `outputSchema`. */
export interface HostProvider extends SubagentProvider {
  start<const S extends object = object>(request: SubagentStartRequest<S>): Promise<SubagentRun<StructuredOf<S>>>
  run<const S extends object = object>(request: SubagentStartRequest<S>): Promise<SubagentResult<StructuredOf<S>>>
  /**
   * A child that outlives its first task (CONTRACT.md §13): fulfils once it is published and the
   * prompt is in its inbox, before any work is done. It takes no `outputSchema`.
   */
  startContinuable(request: ContinuableStartRequest): Promise<ContinuableRun>
}

/** A continuable child's start request: a one-shot's, without `outputSchema` (each activation ends in text). */
export type ContinuableStartRequest = Omit<SubagentStartRequest, 'outputSchema'>

/** The end of one activation of a continuable child (CONTRACT.md §13). */
export interface Settlement {
  /** The child's run id (its session id, as on `subagent/start`). */
  runId: string
  /** The child's session id. */
  id: string
  /** The agent that started the child. */
  parentId: string
  /** Which activation this ends, from 1. */
  activation: number
  stopReason: SubagentStopReason
  /** Read from this activation's events alone (CONTRACT.md §3's rules). */
  output: ContentBlock[]
  /** The activation's final text, when it has one. */
  lastAssistantMessage?: string
  /** Why it did not complete (only then). */
  diagnostic?: string
  /** The usage of this activation's own steps. */
  usage?: Usage
}

/** A live continuable child (CONTRACT.md §13). */
export interface ContinuableRun {
  /** The child's session id. */
  readonly id: string
  /** Adds a message to the child's inbox: one activation each, in order. Throws (ERR_SUBAGENT_DISPOSED) once disposed. */
  send(message: string | ContentBlock[]): void
  /** One settlement per activation, in order; ends once the child is disposed. */
  readonly settlements: AsyncIterable<Settlement>
  /** Cancels a running activation (it settles `aborted`), drops queued messages, removes the child. Idempotent. */
  dispose(): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
}

/** The runners of the `worker` and `process` transports and of a node. */
export interface PoolOptions {
  /** Runners kept started; default half the cores (at least 1). */
  minThreads?: number
  /** Runners at most, for each delegation depth; default 1.5 × the cores. */
  maxThreads?: number
  /** Children sharing one runner; default 1 (a runner to each child). */
  childrenPerWorker?: number
  idleTimeoutMs?: number
  /**
   * How long a new runner may take to load the agent module, in ms; default 30000. A runner still
   * loading past it (top-level code that never completes) is stopped, and the children placed on
   * it fail with a diagnostic saying so, instead of waiting for good.
   */
  loadTimeoutMs?: number
  /** Starts that may wait for a slot; one more is refused at once. Default unbounded. */
  maxQueue?: number
  /** Heap caps per runner, in MB; a child process takes only the two heap sizes. */
  resourceLimits?: ResourceLimits
  /**
   * How much lower than the host's thread a runner is scheduled: 0 (default) to 19, added to the
   * host's nice value (at most 19). Every child waits on the host's thread, so when runners and the
   * host want the same cores, a runner that yields keeps the host from queueing for one. A worker
   * thread is lowered on Linux only (elsewhere the nice value is the whole process's); a child
   * process's main thread, where its children run, on every platform.
   */
  niceIncrement?: number
  /**
   * The runners' whole environment: exact values, or the names of host variables copied when the
   * host is created. Default none: a child never sees the host's `process.env`.
   */
  env?: Record<string, string> | string[]
}

/** Models and tools by name, as a child sees them from its creation on. */
export interface Placement {
  models: ReadonlyMap<string, Model>
  tools: ReadonlyMap<string, ToolDefinition>
  /**
   * The agent module's tools as the host loaded the module: the guidance a child's system prompt
   * carries for those it sees is the host's to write (what a runner says of them is not read).
   */
  moduleTools: ReadonlyMap<string, ToolDefinition>
  /** Why nothing more of the child may be served now (a limit of its budget, or an ancestor's, is spent). */
  refusal(): LimitReason | undefined
}
