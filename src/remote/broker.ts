/**
 * What a broker does for the remote layer, and nothing more: it keeps child jobs in a queue per
 * delegation depth, hands each to one node with a lock only that node can prove, and carries
 * envelopes (bytes, see envelope.ts) to each end's own channel. What is done with them (the take,
 * the links, the heartbeat, the sweep, the pools) is the host's transport (host-transport.ts) and
 * the node (node.ts), whatever the broker; an adapter (src/bullmq) implements these interfaces
 * over its client library and checks its own options.
 *
 * Every wait on the broker is bounded by the adapter, and a failure names the broker, where it
 * is and what could not be done (ERR_SUBAGENT_UNREACHABLE). Sending never throws: bytes that are
 * lost show as silence, and the heartbeat ends the link.
 */
import type { ChildJob } from '../protocol/shapes/job.js'

/** The depth level a child of `depth` is kept at, of a broker's `levels`: deeper ones share the last. */
export function levelOf(depth: number | undefined, levels: number): number {
  return Math.min(Math.max(depth ?? 1, 1), levels)
}

/** What a broker tells the end it serves. */
export interface BrokerEvents {
  /** Bytes published to this end's channel: an envelope, unread. */
  receive(bytes: Buffer): void
  /** A connection that carries frames dropped, and frames may have been lost: every link over it is over. `why` names the broker. */
  lost(why: string): void
}

/** One child's job, as the host that queued it holds it. */
export interface QueuedJob {
  /** Resolves once the job is in the queue. */
  added(): Promise<unknown>
  /** Whether `node` holds the job, by `token` (the job's lock, given only to the node it was handed to). Rejects when the broker cannot say. */
  heldBy(node: string, token: string): Promise<boolean>
  /** Whether the job is lost: gone, failed, or held by a node whose lock expired. Undefined while the broker cannot say. */
  lost(): Promise<boolean | undefined>
  /** Takes the job out of the queue, once it is in; a job a node holds stays (its take is refused). */
  remove(): void
}

/** The host's broker, opened for its id (`host`, which names its channel). */
export interface HostBroker {
  /**
   * Resolves once this host's channel is listened to now: nodes answer there, so no job may name
   * the host before, nor after a dropped connection until it is listened to again.
   */
  listening(): Promise<unknown>
  /** How many depth levels it keeps apart, a queue each (see levelOf). */
  readonly levels: number
  /** Queues `job` for a node serving children of `depth`. */
  enqueue(depth: number, job: ChildJob): QueuedJob
  /**
   * Whether a live node takes jobs of `depth`, busy or not (one other than node `beside`, when
   * given: a node fallen silent may still look connected); undefined while the broker cannot say.
   */
  served(depth: number, beside?: string): Promise<boolean | undefined>
  /** The queue's name as the user gave it, for errors. */
  readonly queue: string
  /** Publishes an envelope to node `node`'s channel. */
  send(node: string, bytes: Buffer): void
  /** Why the host's nodes may have fallen silent, as far as its connection can tell. */
  silenceCause(): string
  close(): Promise<void>
}

export type OpenHostBroker = (host: string, events: BrokerEvents) => HostBroker

/**
 * Runs one job the node was given: `data` as the queue holds it (unchecked), its depth level, and
 * the lock `token` it holds it by. `'unasked'`: the node shut down before it asked for the job's
 * child, so the job goes back to wait for another node (ending it would end a child nobody ran).
 * `'unanswered'`: it asked, but the link ended before the host answered (the host may never have
 * heard the take, or it is dead), so nothing ran: the job goes back once, and ends the next time.
 */
export type RunJob = (data: unknown, level: number, token: string) => Promise<'done' | 'unasked' | 'unanswered'>

/** A node's broker. */
export interface NodeBroker {
  /**
   * Resolves once this node's channel is listened to now: hosts answer there, so before the node
   * takes jobs, and before it asks for a job's child after a dropped connection. Rejects when the
   * broker cannot be reached in its bound.
   */
  listening(): Promise<void>
  /** How many depth levels it keeps apart, a queue each (see levelOf). */
  readonly levels: number
  /**
   * Takes jobs of every level, at most `concurrency` of each at a time; a job is held until `run`
   * settles, fails if it rejects, and goes back to the queue, unrun, if `run` says it asked
   * nothing (`'unasked'`), or the first time it says it was not answered (`'unanswered'`). One
   * that comes while `hasRoom(level)` is false (children placed directly fill the node) goes back
   * to the queue, unrun, for another node, and the level takes none until `roomFreed`. Resolves
   * once taking.
   */
  take(concurrency: number, run: RunJob, hasRoom: (level: number) => boolean): Promise<void>
  /** The node has room at `level` again: a level resting since a job was handed back takes jobs again. */
  roomFreed(level: number): void
  /** Publishes an envelope to host `host`'s channel. */
  send(host: string, bytes: Buffer): void
  /** Takes no new job; resolves once the jobs held have settled, or `deadlineMs` (and the broker's own bound) passed. */
  stop(deadlineMs: number): Promise<void>
  close(): Promise<void>
}

export type OpenNodeBroker = (events: BrokerEvents) => NodeBroker
