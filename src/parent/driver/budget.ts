/**
 * The host's budget tree (CONTRACT.md §11): one node per live agent (a top-level agent, a child),
 * linked to its parent's. It keeps what each agent spent (its own steps and tokens, and its
 * descendants' tokens: the per-tree usage rollup), its deadline, and enforces its limits whatever
 * a runner does: a spent subtree is stopped as a whole, and a host-placed model call beyond a
 * limit is refused.
 *
 * What counts as spent is what the host receives: the `assistant/message` events it mirrors (a
 * module model's usage is what its runner reports), and for a host-placed model the usage chunks
 * the host streamed itself. Of the two, the larger is taken, so a runner that reports less than
 * the host served is not believed. What the tree reports (`totalUsage`) is narrower: only what
 * its sessions recorded, so a failed or cancelled step's tokens are spent but not reported.
 */
import { limitReason, type LimitReason } from '../../agent/limit-stop.js'
import { addUsage } from '../../agent/outcome.js'
import type { StreamMeter } from '../../agent/models/metered.js'
import type { ChildLimits, SessionEvent, Usage } from '../../protocol/shapes/session.js'
import type { StreamChunk } from '../../protocol/shapes/stream.js'
import { narrowest } from './limits.js'
import { MAX_TIMER_MS } from '../options.js'
import { subagentError } from '../../protocol/errors.js'
import { isStreamChunk } from '../../protocol/validators.js'

/** What a budget stops when a limit is reached: the agent's running turn, cancelled with the reason. */
export interface BudgetOwner {
  stop(reason: LimitReason): void
}

/** What a new child's budget starts with: its effective limits, and the limit already spent above it. */
export interface Inherited {
  limits: ChildLimits
  spent?: LimitReason
}

/**
 * How long a spent limit holds (CONTRACT.md §13): a token budget for the life of the node it
 * marks; a deadline for the activation of the agent whose deadline it was, whose pause() lifts it.
 */
type Lasts = 'life' | 'activation'

/** A spent limit as it marks a node and its subtree: the reason, and the node whose limit it is (the one that may lift it). */
interface Mark {
  reason: LimitReason
  by: Budget
}

const zero = (): Usage => ({ inputTokens: 0, outputTokens: 0 })
const tokens = (usage: Usage): number => usage.inputTokens + usage.outputTokens

export class Budget {
  readonly parent: Budget | undefined
  readonly limits: ChildLimits
  readonly #children = new Set<Budget>()
  /** Tokens spent before this node existed (a resumed agent's earlier turns and their children). */
  readonly #before: number
  #owner: BudgetOwner | undefined
  #deadline: number | undefined
  #timer: ReturnType<typeof setTimeout> | undefined
  #reported = zero()
  #served = zero()
  #descendants = zero()
  #reportedSteps = 0
  #servedSteps = 0
  /**
   * The limits spent for this node, each kept as long as it lasts: a deadline's mark lifted at the
   * end of its activation leaves a token budget spent meanwhile (the tokens a step the deadline
   * stopped had streamed) in force.
   */
  readonly #marks: Partial<Record<Lasts, Mark>> = {}
  /**
   * The usage this agent's session records (its steps' own usage, CONTRACT.md §3) and the sum of
   * its descendants': what `totalUsage` reports (§12). A failed or cancelled step's tokens are in
   * no step's usage: they count against `maxTotalTokens` (they were spent), not here.
   */
  #recorded = zero()
  #recordedBelow = zero()
  /** Whether this agent or a descendant recorded any usage: `totalUsage` is absent until then. */
  #recordedAny = false
  /**
   * A limit its own host-served step spent, before its runner recorded that step: it is stopped
   * when the record comes, as inline stops it at the record, so a step that ends the turn
   * completes it on every transport (a cancel sent with the step's last chunk would overtake it).
   * Until then it is refused any further request. The rest of the subtree marked with it (its
   * parent, when an ancestor's budget was spent) is stopped then too, not before: a parent
   * stopped first would cancel this agent before its step is recorded, and the store would miss
   * tokens a resumed ancestor must still count.
   */
  #stopAtRecord: Deferred | undefined
  /** How often the agent moved (CONTRACT.md §8): a request served before a move is made again, so its meter no longer counts. */
  #moves = 0

  constructor(parent: Budget | undefined, limits: ChildLimits, spentBefore = 0) {
    this.parent = parent
    this.limits = limits
    this.#before = spentBefore
    if (parent) parent.#children.add(this)
    // A resumed agent keeps what its tree had left (CONTRACT.md §11): when that is nothing, it makes no request.
    const { maxTotalTokens } = limits
    if (maxTotalTokens !== undefined && this.#total() >= maxTotalTokens) this.#marks.life = { reason: limitReason('maxTotalTokens', maxTotalTokens), by: this }
  }

  /**
   * The effective limits of a child of `parent`: the smallest of the request's, the host's
   * default and what remains of each ancestor's (its time and tokens; its step bound, since a
   * child's steps are its own). Nothing is widened.
   */
  static inherit(parent: Budget | undefined, ...given: Array<ChildLimits | undefined>): Inherited {
    const remaining: ChildLimits[] = []
    let spent: LimitReason | undefined
    for (let node = parent; node; node = node.parent) {
      spent ??= node.#spent()
      const { timeoutMs, maxSteps, maxTotalTokens } = node.limits
      const left: ChildLimits = {}
      if (maxSteps !== undefined) left.maxSteps = maxSteps
      if (timeoutMs !== undefined && node.#deadline !== undefined) {
        const ms = Math.ceil(node.#deadline - performance.now())
        if (ms >= 1) left.timeoutMs = ms
        else spent ??= limitReason('timeoutMs', timeoutMs)
      }
      if (maxTotalTokens !== undefined) {
        const tokensLeft = maxTotalTokens - node.#total()
        if (tokensLeft >= 1) left.maxTotalTokens = tokensLeft
        else spent ??= limitReason('maxTotalTokens', maxTotalTokens)
      }
      remaining.push(left)
    }
    const limits = narrowest(...given, ...remaining)
    return spent ? { limits, spent } : { limits }
  }

  /** The agent runs from now: its deadline starts, and limits reached stop it through `owner`. */
  begin(owner: BudgetOwner, options: { unref?: boolean } = {}): void {
    // Begun again (a continuable child's next activation): its deadline and step count start over,
    // what it spent in tokens does not (CONTRACT.md §13).
    clearTimeout(this.#timer)
    this.#servedSteps = 0
    this.#stopDeferred(false)
    this.#owner = owner
    const { timeoutMs } = this.limits
    if (timeoutMs === undefined) return
    this.#deadline = performance.now() + timeoutMs
    const timedOut = () => this.#exhaust(limitReason('timeoutMs', timeoutMs), 'activation')
    // A timer fires at once beyond MAX_TIMER_MS: a longer deadline is waited for in parts.
    const arm = (ms: number) => {
      this.#timer = setTimeout(() => (ms > MAX_TIMER_MS ? arm(ms - MAX_TIMER_MS) : timedOut()), Math.min(ms, MAX_TIMER_MS))
      // A top-level agent's deadline must not hold the process open while it sits idle.
      if (options.unref) this.#timer.unref()
    }
    arm(timeoutMs)
  }

  /**
   * The agent's run is over, but what it started (its background jobs, its continuable children)
   * may still run: its deadline no longer runs and nothing of it is stopped, and its node stays in
   * the tree until end(), so a limit spent above it still reaches them (CONTRACT.md §11).
   */
  settle(): void {
    clearTimeout(this.#timer)
    this.#timer = undefined
    // Its run ended without recording the step: the rest of the subtree waits for nothing more.
    this.#stopDeferred(false)
    this.#owner = undefined
  }

  /**
   * Between a continuable child's activations: settled, with no deadline. A deadline it had spent
   * was the activation's, not the child's: lifted from its whole subtree (#exhaust marked it), so
   * an idle continuable descendant is not refused its later activations for it.
   */
  pause(): void {
    this.#lift('activation')
    this.settle()
    this.#deadline = undefined
  }

  /** The agent and what it started are gone: settled, and out of the tree (what it spent still counts above it). */
  end(): void {
    this.settle()
    if (this.parent) this.parent.#children.delete(this)
  }

  /** Counts one event the host received of this agent. */
  observe(event: SessionEvent): void {
    // maxSteps bounds a turn. (A one-shot child has one; a runner that invents turns to reset
    // this count still meets the host's own count of the host-placed requests it served.)
    if (event.type === 'turn/start') this.#reportedSteps = 0
    if (event.type === 'child/moved') this.#moved()
    if (event.type !== 'assistant/message') return
    this.#reportedSteps++
    const { maxSteps } = this.limits
    // The runner made a request beyond its bound (its own loop stops before it): stop it.
    if (maxSteps !== undefined && this.#reportedSteps > maxSteps) this.#owner?.stop(limitReason('maxSteps', maxSteps))
    const { usage } = event.data
    if (usage) {
      this.#record(usage)
      const spent = counted(usage)!
      this.#spend(() => void (this.#reported = addUsage(this.#reported, spent)))
    }
    this.#stopDeferred(true)
  }

  /** Stops what a spent budget deferred to this agent's record: the rest of its subtree, and `self` too. */
  #stopDeferred(self: boolean): void {
    const deferred = this.#stopAtRecord
    if (!deferred) return
    this.#stopAtRecord = undefined
    if (self) this.#owner?.stop(deferred.reason)
    for (const node of deferred.others) node.#owner?.stop(deferred.reason)
  }

  /**
   * A move (CONTRACT.md §8): a request served whose message the dead runner never recorded is
   * made again on the new runner, so its usage and its step would count twice; own usage and
   * steps are what the session holds. A limit that dropped step spent, of this agent's own
   * budget, is unspent with it (the step made again spends it again, or not); an ancestor's was
   * spent for its whole subtree, which was stopped, and stops this agent too.
   */
  #moved(): void {
    this.#moves++
    this.#servedSteps = this.#reportedSteps
    const deferred = this.#stopAtRecord
    // Only a count the served usage raised changes: a child no model reported usage for still has none (§12).
    if (tokens(this.#served) > tokens(this.#reported)) this.#spend(() => void (this.#served = this.#reported))
    else this.#served = this.#reported
    if (!deferred) return
    const { maxTotalTokens } = this.limits
    if (deferred.spentAt === this && maxTotalTokens !== undefined && this.#total() < maxTotalTokens) {
      // Its own budget, spent by the dropped step alone: unspent, and nothing of its subtree is stopped.
      this.#stopAtRecord = undefined
      this.#lift('life')
    } else this.#stopDeferred(true)
  }

  /** This node's own limit that lasts so long is no longer spent: its mark is lifted from its subtree, where #exhaust put it. */
  #lift(lasts: Lasts): void {
    const lift = (node: Budget) => {
      if (node.#marks[lasts]?.by === this) delete node.#marks[lasts]
      for (const child of node.#children) lift(child)
    }
    lift(this)
  }

  /** The limit spent for this node, if one is: a token budget first, since it outlasts a deadline. */
  #spent(): LimitReason | undefined {
    return (this.#marks.life ?? this.#marks.activation)?.reason
  }

  /** Why no further model request may be made now, if none may. */
  refusal(): LimitReason | undefined {
    for (let node: Budget | undefined = this; node; node = node.parent) {
      const spent = node.#spent()
      if (spent) return spent
    }
    return undefined
  }

  /** Admits one host-placed model request, or says which limit refuses it (and stops the agent). */
  admit(): LimitReason | undefined {
    let refused = this.refusal()
    const { maxSteps } = this.limits
    if (!refused && maxSteps !== undefined && this.#servedSteps >= maxSteps) refused = limitReason('maxSteps', maxSteps)
    if (refused) {
      this.#stopDeferred(false)
      this.#owner?.stop(refused)
      return refused
    }
    this.#servedSteps++
    return undefined
  }

  /** Admits one host-placed model request and counts what it streams (see `RequestMeter`); throws when refused. */
  meter(): StreamMeter {
    return new RequestMeter(this)
  }

  /** A host-placed model's step usage, as the host streamed it; not once the agent moved since the request began (it is made again). */
  served(usage: Usage, moves: number): void {
    if (moves !== this.#moves) return
    this.#spend(() => void (this.#served = addUsage(this.#served, usage)), this)
  }

  /**
   * An inline child's host model reported `usage` for a step that then failed: counted with its
   * recorded steps (an inline child's host models are not metered, so this is all it was served
   * beyond them), as a runner's child's meter counts it.
   */
  unrecorded(usage: Usage): void {
    const spent = counted(usage)
    if (spent) this.#spend(() => void (this.#reported = addUsage(this.#reported, spent)), this)
  }

  /** How often the agent moved so far: what a request's meter is served against. */
  get moves(): number {
    return this.#moves
  }

  /** Own recorded usage plus every descendant's (CONTRACT.md §12); absent while nothing in the tree recorded any. */
  totalUsage(): Usage | undefined {
    return this.#recordedAny ? addUsage(this.#recorded, this.#recordedBelow) : undefined
  }

  /** A recorded step's usage as its session holds it (so `totalUsage` sums what `usage` does), but a count no model reports (negative, not finite) as none. */
  #record(recorded: Usage): void {
    const usage = { inputTokens: reportable(recorded.inputTokens), outputTokens: reportable(recorded.outputTokens) }
    this.#recorded = addUsage(this.#recorded, usage)
    this.#recordedAny = true
    for (let node = this.parent; node; node = node.parent) {
      node.#recordedBelow = addUsage(node.#recordedBelow, usage)
      node.#recordedAny = true
    }
  }

  #tree(): Usage {
    return addUsage(this.#own(), this.#descendants)
  }

  #own(): Usage {
    return tokens(this.#served) > tokens(this.#reported) ? this.#served : this.#reported
  }

  #total(): number {
    return this.#before + tokens(this.#tree())
  }

  /** Applies a change to this node's own usage, rolls it up the tree, and stops every subtree now over its budget. */
  #spend(change: () => void, recording?: Budget): void {
    const before = this.#own()
    change()
    const after = this.#own()
    const delta = { inputTokens: after.inputTokens - before.inputTokens, outputTokens: after.outputTokens - before.outputTokens }
    if (delta.inputTokens === 0 && delta.outputTokens === 0) return
    for (let node = this.parent; node; node = node.parent) node.#descendants = addUsage(node.#descendants, delta)
    // The outermost spent budget wins: its reason stops the widest subtree.
    let over: { node: Budget; value: number } | undefined
    for (let node: Budget | undefined = this; node; node = node.parent) {
      const { maxTotalTokens } = node.limits
      if (maxTotalTokens !== undefined && node.#total() >= maxTotalTokens) over = { node, value: maxTotalTokens }
    }
    if (over) over.node.#exhaust(limitReason('maxTotalTokens', over.value), 'life', recording)
  }

  /**
   * A limit of this node is spent for as long as `lasts`: nothing below it makes another request,
   * and what runs is stopped. Only a node whose token budget is spent, or one already marked for
   * as long, has nothing more to mark: a budget spent after a deadline is marked too, to outlast it.
   */
  #exhaust(reason: LimitReason, lasts: Lasts, recording?: Budget): void {
    if (this.#marks.life || this.#marks[lasts]) return
    const mark: Mark = { reason, by: this }
    const stopping: Budget[] = []
    const visit = (node: Budget) => {
      node.#marks[lasts] ??= mark
      stopping.push(node)
      for (const child of node.#children) visit(child)
    }
    visit(this)
    if (recording && stopping.includes(recording)) {
      recording.#stopAtRecord = { reason, spentAt: this, others: stopping.filter((node) => node !== recording) }
      return
    }
    for (const node of stopping) node.#owner?.stop(reason)
  }
}

/** A stop deferred to an agent's record of the step that spent the budget (see `Budget.#stopAtRecord`). */
interface Deferred {
  reason: LimitReason
  /** The node whose budget was spent. */
  spentAt: Budget
  /** The rest of the subtree it marked. */
  others: Budget[]
}

const reportable = (n: number): number => (Number.isFinite(n) && n > 0 ? n : 0)

/** Usage as counted: a negative or non-finite count (a runner's or a model's) counts as none, and a fraction as a whole token. */
function counted(usage: Usage | undefined): Usage | undefined {
  if (!usage) return undefined
  const count = (n: number) => Math.ceil(reportable(n))
  return { inputTokens: count(usage.inputTokens), outputTokens: count(usage.outputTokens) }
}

/**
 * One host-served model request as a child's budget counts it: admitted as it starts (a refusal
 * is thrown), and the last usage chunk the host streamed counted once, when it ends, fails or is
 * left. The loop keeps a step's last usage chunk, and so does the count.
 */
class RequestMeter implements StreamMeter {
  readonly #budget: Budget
  /** The agent's moves when the request began: one that moved since is made again, and counts there. */
  readonly #moves: number
  #usage: Usage | undefined
  #open = true

  constructor(budget: Budget) {
    const refused = budget.admit()
    if (refused) throw subagentError('ERR_SUBAGENT_LIMIT', `the host refused the model request: the child reached limits.${refused.limit} (${refused.value})`)
    this.#budget = budget
    this.#moves = budget.moves
  }

  see(chunk: StreamChunk): void {
    // A chunk its reader has not checked yet (inline's loop checks it after): a malformed one ends the step, and counts for nothing.
    if (chunk?.type === 'usage' && isStreamChunk(chunk)) this.#usage = { inputTokens: chunk.inputTokens, outputTokens: chunk.outputTokens }
  }

  close(): void {
    if (!this.#open) return
    this.#open = false
    const spent = counted(this.#usage)
    if (spent) this.#budget.served(spent, this.#moves)
  }
}
