/**
 * The seam between the run driver and where a child's loop runs. A transport builds the child
 * from a plain-data spec inside the creation transaction and streams its events back; the driver
 * owns depth, publication, abort, dispose and result extraction for every transport alike.
 */
import type { ChildSpec } from '../agent/child.js'
import type { AgentView } from '../agent/view.js'
import type { ContentBlock } from '../protocol/shapes/content.js'
import type { SessionEvent } from '../protocol/shapes/session.js'
import type { Notice } from '../protocol/shapes/notice.js'
import type { ChildFault, RunnerConfig } from '../protocol/messages.js'
import type { Placement } from './types.js'

/** What the transport knows beyond the events: a capture, or a fault the events cannot show. */
export interface ChildOutcome {
  structured?: { value: unknown }
  fault?: ChildFault
}

/** The host's copy of the child: what `host.agents` shows and host tools see as `exec.agent`. */
export interface ChildMirror {
  readonly view: AgentView
  /** Receives the child's events in order as they arrive (the seed is not repeated). */
  append(event: SessionEvent): void
  /** A model request of the child was made: the host made it (a host-placed model it serves, an inline child's), or its runner says so. */
  requested(): void
}

export interface ChildHandle {
  /** Undoes creation; the child never ran. */
  rollback(): Promise<void>
  /** Called once the child is published: drives one turn with the prompt; settles when the child is idle or gone. */
  run(prompt: ContentBlock[]): Promise<ChildOutcome>
  /** Cooperative cancel: the running turn ends `aborted` with this reason. */
  cancel(reason: unknown): void
  /** A settlement notice for this child as a parent (CONTRACT.md §13): into its inbox, wherever its loop runs. */
  notify(notice: Notice): void
  /** Frees what the child holds; called once, after `run` settled (or after a rollback-free gap). */
  release(): Promise<void>
}

/** Where children run, as the run driver sees it: inline, a pool of runners, nodes behind a queue. */
export interface ChildTransport {
  /** True when children run in the host's own thread. */
  readonly local: boolean
  /** Builds an unpublished child. Rejects (leaving nothing behind) if building fails. */
  create(spec: ChildSpec, mirror: ChildMirror, signal: AbortSignal): Promise<ChildHandle>
  close(): Promise<void>
}

/** What the host gives a transport it was handed (`createHost({ transport })`) once its own options are settled. */
export interface TransportContext {
  abortGraceMs: number
  /** What every runner of this host shares: the agent module's URL, the tool-call bound, the abort grace. */
  config: RunnerConfig
  /** The host-placed models and tools the child `id` may call, snapshot when it is created (its models metered by its budget). */
  placement(id: string): Placement
}

/**
 * A transport made outside the host, for `createHost({ transport })`: `bullmqTransport(...)`
 * from 'subagent-worker/bullmq'. Opened once, by the host that is given it.
 */
export interface Transport {
  /** Names it in errors, e.g. 'bullmq'. */
  readonly name: string
  open(context: TransportContext): ChildTransport
}
