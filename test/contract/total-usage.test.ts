/**
 * CONTRACT.md §12, `totalUsage`, on every transport: a child's own usage plus every
 * descendant's, over a three-level tree (child, grandchild, great-grandchild), on the result, on
 * `subagent/end` and on the `child:end` channel, with exact numbers. The sums are the host's own
 * count of the tree: nothing a runner says of its descendants is asked for. Only recorded usage
 * is reported; a failed step's tokens are spent (they count against `maxTotalTokens`), not reported.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import { afterEach, describe, expect, it } from 'vitest'
import { createSubagentTool, defineTool, type ChildEndMessage, type StreamChunk, type Usage } from 'subagent-worker'
import { closeHosts, setup, TRANSPORTS } from '../support/harness.js'
import { recordLifecycle } from '../support/driver-helpers.js'
import { Watch } from '../support/watch.js'

afterEach(closeHosts)

const CHILD_END = 'subagent-worker:child:end'

const usage = (inputTokens: number, outputTokens: number): StreamChunk => ({ type: 'usage', inputTokens, outputTokens })
const delegateStep = (id: string, prompt: string, spent: StreamChunk): StreamChunk[] => [
  { type: 'tool-call', id, name: 'subagent', arguments: JSON.stringify({ description: `${prompt} task`, prompt }) },
  spent,
  { type: 'finish', reason: 'tool-calls' },
]
const textStep = (text: string, spent: StreamChunk): StreamChunk[] => [{ type: 'text-delta', text }, spent, { type: 'finish', reason: 'stop' }]

// One host model serves the whole tree, one request at a time (each parent waits on its child):
// child step 1, grandchild step 1, great-grandchild, grandchild step 2, child step 2. Every count
// is a distinct power of two, so a sum that misses or repeats a step cannot come out right.
const SCRIPT = [
  delegateStep('c1', 'grandchild', usage(1, 2)),
  delegateStep('g1', 'great-grandchild', usage(4, 8)),
  textStep('leaf done', usage(256, 512)),
  textStep('middle done', usage(64, 128)),
  textStep('top done', usage(16, 32)),
]

const OWN: Record<number, Usage> = { 1: { inputTokens: 17, outputTokens: 34 }, 2: { inputTokens: 68, outputTokens: 136 }, 3: { inputTokens: 256, outputTokens: 512 } }
const TOTAL: Record<number, Usage> = { 1: { inputTokens: 341, outputTokens: 682 }, 2: { inputTokens: 324, outputTokens: 648 }, 3: { inputTokens: 256, outputTokens: 512 } }

describe.each(TRANSPORTS)('§12 totalUsage [%s]', (transport) => {
  it('a three-level tree: own usage plus every descendant’s on the result, subagent/end and child:end', async () => {
    const fixture = setup(transport, SCRIPT)
    fixture.host.tools.register(createSubagentTool(fixture.host, { provider: 'spawn', enableRunInBackground: false }))
    const { ends, ended } = recordLifecycle(fixture.host)
    const published: ChildEndMessage[] = []
    const watch = new Watch()
    const onEnd = (message: unknown) => (published.push(message as ChildEndMessage), watch.changed())
    subscribe(CHILD_END, onEnd)
    try {
      const result = await fixture.host.spawn.run({ prompt: 'delegate twice down', parent: fixture.parent })
      expect(result).toEqual({ output: [{ type: 'text', text: 'top done' }], usage: OWN[1], totalUsage: TOTAL[1], stopReason: 'completed' })
      expect(fixture.model.requests).toHaveLength(5)
      await ended(3)
      await watch.until('three child:end messages', () => published.length >= 3)
      for (const depth of [1, 2, 3]) {
        expect(ends.find((end) => end.depth === depth)).toMatchObject({ stopReason: 'completed', usage: OWN[depth], totalUsage: TOTAL[depth] })
        expect(published.find((end) => end.depth === depth)).toMatchObject({ stopReason: 'completed', usage: OWN[depth], totalUsage: TOTAL[depth] })
      }
    } finally {
      unsubscribe(CHILD_END, onEnd)
    }
  })

  it('absent when nothing in the tree reported usage', async () => {
    const fixture = setup(transport, [[{ type: 'text-delta', text: 'free' }, { type: 'finish', reason: 'stop' }]])
    const result = await fixture.host.spawn.run({ prompt: 'no usage', parent: fixture.parent })
    expect(result).toEqual({ output: [{ type: 'text', text: 'free' }], stopReason: 'completed' })
  })

  it("a failed step's tokens are in no step's usage, so not in totalUsage (own usage plus descendants', summed)", async () => {
    const failing: StreamChunk[] = [{ type: 'text-delta', text: 'cut' }, usage(4, 8)] // no finish: the step fails
    const fixture = setup(transport, [delegateStep('c1', 'grandchild', usage(1, 2)), failing, textStep('top done', usage(16, 32))])
    fixture.host.tools.register(createSubagentTool(fixture.host, { provider: 'spawn' }))
    const ends = recordLifecycle(fixture.host)
    const result = await fixture.host.spawn.run({ prompt: 'delegate', parent: fixture.parent })
    expect(result).toMatchObject({ stopReason: 'completed', usage: { inputTokens: 17, outputTokens: 34 }, totalUsage: { inputTokens: 17, outputTokens: 34 } })
    const grandchild = ends.ends.find((end) => end.runId !== ends.starts[0]!.runId)!
    expect(grandchild.stopReason).toBe('error')
    expect(grandchild).not.toHaveProperty('usage')
    expect(grandchild).not.toHaveProperty('totalUsage')
  })

  it("yet a failed step's tokens were spent: they count against an ancestor's maxTotalTokens (§11), which stops the tree", async () => {
    const failing: StreamChunk[] = [{ type: 'text-delta', text: 'cut' }, usage(4, 8)] // no finish: the step fails
    const fixture = setup(transport, [delegateStep('c1', 'grandchild', usage(0, 1)), failing, textStep('never asked', usage(16, 32))])
    fixture.host.tools.register(createSubagentTool(fixture.host, { provider: 'spawn' }))
    // 1 token recorded, 12 spent by the grandchild's failed step: 13 reach the budget.
    const result = await fixture.host.spawn.run({ prompt: 'delegate', parent: fixture.parent, limits: { maxTotalTokens: 13 } })
    expect(result).toMatchObject({ stopReason: 'aborted', diagnostic: 'the child exceeded limits.maxTotalTokens (13 tokens)', usage: { inputTokens: 0, outputTokens: 1 }, totalUsage: { inputTokens: 0, outputTokens: 1 } })
    expect(fixture.model.requests).toHaveLength(2)
  })

  it("a failed step after recorded ones: usage and totalUsage are the recorded steps' alone", async () => {
    const callStep: StreamChunk[] = [{ type: 'tool-call', id: 'n1', name: 'noop', arguments: '{}' }, usage(1, 2), { type: 'finish', reason: 'tool-calls' }]
    const failing: StreamChunk[] = [{ type: 'text-delta', text: 'cut' }, usage(4, 8)] // no finish: the step fails
    const fixture = setup(transport, [callStep, failing])
    fixture.host.tools.register(defineTool({ name: 'noop', description: 'does nothing', parameters: { type: 'object' }, execute: () => 'ok' }))
    const result = await fixture.host.spawn.run({ prompt: 'two steps', parent: fixture.parent })
    expect(result).toMatchObject({ stopReason: 'error', usage: { inputTokens: 1, outputTokens: 2 }, totalUsage: { inputTokens: 1, outputTokens: 2 } })
  })

  it("a fraction of a token is summed as reported, in totalUsage as in usage; neither is the recorded step's own object", async () => {
    const fixture = setup(transport, [textStep('a fraction', usage(2.5, 0.25))])
    const run = await fixture.host.spawn.start({ prompt: 'fractions', parent: fixture.parent })
    const result = await run.result
    expect(result).toMatchObject({ usage: { inputTokens: 2.5, outputTokens: 0.25 }, totalUsage: { inputTokens: 2.5, outputTokens: 0.25 } })
    const message = fixture.host.agents.get(run.id)!.session.events.find((event) => event.type === 'assistant/message')!
    expect(message.type === 'assistant/message' && message.data.usage).toEqual({ inputTokens: 2.5, outputTokens: 0.25 })
    expect(result.usage).not.toBe(message.type === 'assistant/message' ? message.data.usage : undefined)
    await run.dispose()
  })

  it('a malformed usage chunk counts for nothing: the step fails, and the tree reports no usage', async () => {
    const fixture = setup(transport, [[{ type: 'text-delta', text: 'hi' }, usage(-5, 8), { type: 'finish', reason: 'stop' }]])
    const result = await fixture.host.spawn.run({ prompt: 'bad usage', parent: fixture.parent })
    expect(result.stopReason).toBe('error')
    expect(result).not.toHaveProperty('usage')
    expect(result).not.toHaveProperty('totalUsage')
  })

  it('a zero count is a count: the tree reports zero, as the child’s own usage does', async () => {
    const fixture = setup(transport, [textStep('zero', usage(0, 0))])
    const result = await fixture.host.spawn.run({ prompt: 'zero usage', parent: fixture.parent })
    expect(result).toEqual({ output: [{ type: 'text', text: 'zero' }], usage: { inputTokens: 0, outputTokens: 0 }, totalUsage: { inputTokens: 0, outputTokens: 0 }, stopReason: 'completed' })
  })
})
