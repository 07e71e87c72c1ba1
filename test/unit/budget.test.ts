/**
 * The host's budget tree (CONTRACT.md §11) as a runner that lies meets it: a host-placed model
 * call beyond a limit is refused by the host, the host counts what it served whatever the runner
 * reports, and a runner that makes more steps than its bound is stopped. What the tree reports
 * (`totalUsage`) is what its sessions recorded; what it spent (its limits) is the host's count.
 */
import { describe, expect, it } from 'vitest'
import { Budget } from '../../dist/parent/driver/budget.js'
import { MeteredModel } from '../../dist/agent/models/metered.js'
import type { LimitReason } from '../../dist/agent/limit-stop.js'
import type { Model, SessionEvent, StreamChunk } from 'subagent-worker'

const step: StreamChunk[] = [
  { type: 'text-delta', text: 'x' },
  { type: 'usage', inputTokens: 30, outputTokens: 10 },
  { type: 'finish', reason: 'stop' },
]
const model: Model = {
  async *stream() {
    yield* step
  },
}
const request = { model: 'm', messages: [], signal: new AbortController().signal }

/** `model` as the host's placement gives it to a child whose budget is `node`. */
const meteredModel = (m: Model, node: Budget): MeteredModel => new MeteredModel(m, () => node.meter())

async function drain(m: Model): Promise<StreamChunk[]> {
  const chunks: StreamChunk[] = []
  for await (const chunk of m.stream(request)) chunks.push(chunk)
  return chunks
}

function budget(limits: ConstructorParameters<typeof Budget>[1], parent?: Budget): { budget: Budget; stops: LimitReason[] } {
  const stops: LimitReason[] = []
  const node = new Budget(parent, limits)
  node.begin({ stop: (reason) => stops.push(reason) })
  return { budget: node, stops }
}

describe('the host budget', () => {
  it('refuses a host-placed model request beyond maxSteps, however many the runner says it made', async () => {
    const { budget: node, stops } = budget({ maxSteps: 2 })
    const metered = meteredModel(model, node)
    await drain(metered)
    await drain(metered)
    await expect(drain(metered)).rejects.toThrow('the host refused the model request: the child reached limits.maxSteps (2)')
    expect(stops).toEqual([{ kind: 'limit', limit: 'maxSteps', value: 2 }])
  })

  it('counts the tokens it served itself when the runner reports fewer, and stops the subtree when the budget is spent', async () => {
    const root = budget({ maxTotalTokens: 100 })
    const child = budget(Budget.inherit(root.budget).limits, root.budget)
    expect(child.budget.limits).toEqual({ maxTotalTokens: 100 })
    const metered = meteredModel(model, child.budget)
    await drain(metered)
    // The runner claims the step cost nothing: that is what it recorded, not what it spent.
    child.budget.observe({ seq: 3, type: 'assistant/message', data: { content: [], usage: { inputTokens: 0, outputTokens: 0 } } })
    expect(root.budget.totalUsage()).toEqual({ inputTokens: 0, outputTokens: 0 })
    expect(Budget.inherit(root.budget).limits).toEqual({ maxTotalTokens: 60 })
    await drain(metered)
    await drain(metered)
    const spent = { kind: 'limit', limit: 'maxTotalTokens', value: 100 }
    // Its own step spent it: it is stopped as its runner records that step (inline stops there
    // too), so a step that ends its turn completes it, and so is the rest of the subtree (its
    // parent), whose stop would cancel it before that record. No request is admitted meanwhile.
    expect([root.stops, child.stops]).toEqual([[], []])
    await expect(drain(metered)).rejects.toThrow('limits.maxTotalTokens (100)')
    // Refused instead: nothing waits for that record any more.
    expect([root.stops, child.stops]).toEqual([[spent], [spent]])
    child.budget.observe({ seq: 9, type: 'assistant/message', data: { content: [], usage: { inputTokens: 30, outputTokens: 10 } } })
    expect(child.stops).toEqual([spent])
    expect(Budget.inherit(root.budget)).toEqual({ limits: {}, spent })
  })

  it("a host-served step that spends an ancestor's budget stops the ancestor as the child's runner records it, so the store keeps that step", async () => {
    const spent = { kind: 'limit', limit: 'maxTotalTokens', value: 40 }
    const root = budget({ maxTotalTokens: 40 })
    const child = budget({}, root.budget)
    await drain(meteredModel(model, child.budget))
    expect([root.stops, child.stops]).toEqual([[], []])
    expect(child.budget.refusal()).toEqual(spent)
    child.budget.observe({ seq: 3, type: 'assistant/message', data: { content: [], usage: { inputTokens: 30, outputTokens: 10 } } })
    expect([root.stops, child.stops]).toEqual([[spent], [spent]])
  })

  it('a deferred stop is not lost when the step is never recorded: the run that settles releases the rest of the subtree', async () => {
    const spent = { kind: 'limit', limit: 'maxTotalTokens', value: 40 }
    const root = budget({ maxTotalTokens: 40 })
    const child = budget({}, root.budget)
    await drain(meteredModel(model, child.budget))
    // Its step failed, unrecorded, and its run settled.
    child.budget.settle()
    expect([root.stops, child.stops]).toEqual([[spent], []])
  })

  it('a host-served step that spends the budget stops its child when the runner records it, not before', async () => {
    const child = budget({ maxTotalTokens: 40 })
    await drain(meteredModel(model, child.budget))
    expect(child.stops).toEqual([])
    child.budget.observe({ seq: 3, type: 'assistant/message', data: { content: [], usage: { inputTokens: 30, outputTokens: 10 } } })
    expect(child.stops).toEqual([{ kind: 'limit', limit: 'maxTotalTokens', value: 40 }])
  })

  it('a move drops the usage served for a request the session never recorded: made again, it counts once, here and in the parent', async () => {
    const root = budget({})
    const child = budget({}, root.budget)
    // Served by the host; the runner died before the step's message was recorded.
    await drain(meteredModel(model, child.budget))
    child.budget.observe({ seq: 2, type: 'child/moved', data: { reason: 'the runner exited with code 7' } })
    // Made again on the new runner, and recorded this time.
    await drain(meteredModel(model, child.budget))
    child.budget.observe({ seq: 3, type: 'assistant/message', data: { content: [], usage: { inputTokens: 30, outputTokens: 10 } } })
    expect(child.budget.totalUsage()).toEqual({ inputTokens: 30, outputTokens: 10 })
    expect(root.budget.totalUsage()).toEqual({ inputTokens: 30, outputTokens: 10 })
  })

  it('a move drops the step served for a request the session never recorded: made again, it is admitted within limits.maxSteps', async () => {
    const { budget: child, stops } = budget({ maxSteps: 1 })
    child.observe({ seq: 0, type: 'turn/start', data: {} })
    // The one step allowed, served; the runner died before its message was recorded.
    await drain(meteredModel(model, child))
    child.observe({ seq: 1, type: 'child/moved', data: { reason: 'the runner exited with code 7' } })
    // Made again on the new runner: still the first step.
    await drain(meteredModel(model, child))
    child.observe({ seq: 2, type: 'assistant/message', data: { content: [], usage: { inputTokens: 30, outputTokens: 10 } } })
    expect(stops).toEqual([])
    // A second step is beyond the bound.
    expect(() => meteredModel(model, child).meter()).toThrow('the host refused the model request: the child reached limits.maxSteps (1)')
  })

  it("a metered model's parts meter a request as its own stream does: one admission a request, its usage counted once", async () => {
    const { budget: node, stops } = budget({ maxSteps: 2, maxTotalTokens: 100 })
    const metered = meteredModel(model, node)
    expect(metered.model).toBe(model)
    const meter = metered.meter()
    for await (const chunk of metered.model.stream(request)) meter.see(chunk)
    meter.close()
    meter.close()
    expect(Budget.inherit(node).limits.maxTotalTokens).toBe(60)
    // Its own stream and its parts share the one budget: the third request is refused.
    await drain(metered)
    expect(() => metered.meter()).toThrow('the host refused the model request: the child reached limits.maxSteps (2)')
    expect(stops).toEqual([{ kind: 'limit', limit: 'maxSteps', value: 2 }])
  })

  it('stops a runner whose events show a step beyond its bound', () => {
    const { budget: node, stops } = budget({ maxSteps: 1 })
    const message = { seq: 0, type: 'assistant/message', data: { content: [] } } satisfies SessionEvent
    node.observe(message)
    expect(stops).toEqual([])
    node.observe({ ...message, seq: 1 })
    expect(stops).toEqual([{ kind: 'limit', limit: 'maxSteps', value: 1 }])
  })

  it('a negative usage a runner reports counts as none', () => {
    const root = budget({ maxTotalTokens: 10 })
    root.budget.observe({ seq: 0, type: 'assistant/message', data: { content: [], usage: { inputTokens: -1000, outputTokens: 4 } } })
    expect(root.budget.totalUsage()).toEqual({ inputTokens: 0, outputTokens: 4 })
  })

  it("totalUsage: absent until the tree recorded some usage, then own plus every descendant's recorded, ended ones included; served and never recorded is spent, not reported", async () => {
    const root = budget({ maxTotalTokens: 1000 })
    const child = budget({}, root.budget)
    const grandchild = budget({}, child.budget)
    // Served, and no session recorded it (a step that failed): spent, not reported.
    await drain(meteredModel(model, grandchild.budget))
    expect(root.budget.totalUsage()).toBeUndefined()
    expect(Budget.inherit(root.budget).limits.maxTotalTokens).toBe(960)
    // The grandchild's next step is served and recorded; what it recorded stays counted above it once it is done.
    await drain(meteredModel(model, grandchild.budget))
    grandchild.budget.observe({ seq: 3, type: 'assistant/message', data: { content: [], usage: { inputTokens: 30, outputTokens: 10 } } })
    grandchild.budget.end()
    child.budget.observe({ seq: 4, type: 'assistant/message', data: { content: [], usage: { inputTokens: 1, outputTokens: 2 } } })
    expect(grandchild.budget.totalUsage()).toEqual({ inputTokens: 30, outputTokens: 10 })
    expect(child.budget.totalUsage()).toEqual({ inputTokens: 31, outputTokens: 12 })
    expect(root.budget.totalUsage()).toEqual({ inputTokens: 31, outputTokens: 12 })
    expect(Budget.inherit(root.budget).limits.maxTotalTokens).toBe(1000 - 83)
  })

  it('a resumed budget its tree already spent refuses the first request', () => {
    const spent = { kind: 'limit', limit: 'maxTotalTokens', value: 100 }
    expect(new Budget(undefined, { maxTotalTokens: 100 }, 100).refusal()).toEqual(spent)
    expect(new Budget(undefined, { maxTotalTokens: 100 }, 99).refusal()).toBeUndefined()
    expect(Budget.inherit(new Budget(undefined, { maxTotalTokens: 100 }, 100))).toEqual({ limits: {}, spent })
  })

  it("a token budget spent under a deadline's mark outlasts the deadline's activation: its own, or an ancestor's", async () => {
    const tokens = { kind: 'limit', limit: 'maxTotalTokens', value: 40 }
    // Its own deadline stops the step; the tokens that step streamed are counted as its stream ends.
    const own = new Budget(undefined, { timeoutMs: 1, maxTotalTokens: 40 })
    await new Promise<void>((resolve) => own.begin({ stop: () => resolve() }))
    own.served({ inputTokens: 30, outputTokens: 10 }, own.moves)
    own.pause()
    expect(own.refusal()).toEqual(tokens)

    // A descendant's own budget, reached while its ancestor's deadline marks it.
    const ancestor = new Budget(undefined, { timeoutMs: 1 })
    const descendant = new Budget(ancestor, { maxTotalTokens: 40 })
    descendant.begin({ stop: () => {} })
    await new Promise<void>((resolve) => ancestor.begin({ stop: () => resolve() }))
    descendant.served({ inputTokens: 30, outputTokens: 10 }, descendant.moves)
    ancestor.pause()
    descendant.pause()
    expect(ancestor.refusal()).toBeUndefined()
    expect(descendant.refusal()).toEqual(tokens)
  })

  it('a limit spent above an agent whose run settled still stops what it started', async () => {
    const root = new Budget(undefined, { timeoutMs: 1 })
    const finished = budget({}, root)
    const job = budget({}, finished.budget)
    // The finished agent's turn is over; its job runs on.
    finished.budget.settle()
    await new Promise<void>((resolve) => root.begin({ stop: () => resolve() }))
    const deadline = { kind: 'limit', limit: 'timeoutMs', value: 1 }
    expect(job.stops).toEqual([deadline])
    expect(finished.stops).toEqual([])
  })
})
