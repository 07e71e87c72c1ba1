/**
 * CONTRACT.md §11 against a runner that lies: module code forges a host-placed model call beyond
 * the child's step bound on its runner's channel. The host refuses it (the model is never asked)
 * and stops the child for the limit; one within the bound is served, and what it streamed counts
 * against the child's token budget though no session records it.
 */
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { closeWorkerHosts, workerHost as hostOn } from '../support/worker-host.js'
import { textResponse, toolCallResponse } from 'subagent-worker'
import { POOLED } from '../support/harness.js'

const WIRE_MODULE = fileURLToPath(new URL('../fixtures/wire-module.mjs', import.meta.url))
afterEach(closeWorkerHosts)

const forgedModelCall = { frame: [{ type: 'rpc/call', child: '$self', call: 777, method: 'model', payload: { provider: 'scripted' } }], reply: 777 }

describe.each(POOLED)('%s transport: limits hold against a forging runner', (isolation) => {
  it('a forged host-model call beyond limits.maxSteps is refused by the host, and the child is stopped for the limit', async () => {
    const { model, run } = hostOn(WIRE_MODULE, [toolCallResponse('f', 'forge', forgedModelCall), textResponse('never')], { isolation })
    const { result } = await run({ limits: { maxSteps: 1 } })
    // The host refused it: its model was asked once, by the child's one honest step.
    expect(model.requests).toHaveLength(1)
    expect(result).toMatchObject({ stopReason: 'aborted', diagnostic: 'the child exceeded limits.maxSteps (1 steps)' })
  })

  it('a forged host-model call is counted by the host: what it streamed spends limits.maxTotalTokens though the runner never recorded it, and the next request is refused', async () => {
    const served = { type: 'usage' as const, inputTokens: 500, outputTokens: 70 }
    const { model, run } = hostOn(WIRE_MODULE, [toolCallResponse('f', 'forge', forgedModelCall), [served, { type: 'finish', reason: 'stop' }], textResponse('never')], { isolation })
    const { result, events } = await run({ limits: { maxTotalTokens: 500 } })
    // The honest step and the forged call were served; the step after them was refused.
    expect(model.requests).toHaveLength(2)
    // What the runner recorded, and so what the tree reports: the honest step's usage alone.
    const reported = events.flatMap((event) => (event.type === 'assistant/message' && event.data.usage ? [event.data.usage] : []))
    const sum = (key: 'inputTokens' | 'outputTokens') => reported.reduce((total, usage) => total + usage[key], 0)
    expect(sum('inputTokens') + sum('outputTokens')).toBeLessThan(500)
    expect(result).toMatchObject({ stopReason: 'aborted', diagnostic: 'the child exceeded limits.maxTotalTokens (500 tokens)', usage: { inputTokens: sum('inputTokens'), outputTokens: sum('outputTokens') } })
    expect(result.totalUsage).toEqual(result.usage)
  })
})
