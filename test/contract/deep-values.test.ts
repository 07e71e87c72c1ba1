/**
 * CONTRACT.md §8: nothing that fails to cross is dropped silently, and every transport treats a
 * too-deep value alike. Values are bounded at MAX_VALUE_DEPTH where they enter: a tool value
 * beyond it is a FAILED result saying so; model arguments beyond it (a tool call, or
 * structured_output) are INVALID_ARGS. The child's event sequence stays whole.
 */
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { textResponse, toolCallResponse } from 'subagent-worker'
import { closeHosts, setup, TRANSPORTS } from '../support/harness.js'
import { echoTool, spawnChild, toolResults } from '../support/loop-helpers.js'

afterEach(closeHosts)

const DEEP_MODULE = fileURLToPath(new URL('../fixtures/deep-module.mjs', import.meta.url))
/** Past what a worker's stack can decode (the probe's 5,000), far past the limit of 1,000. */
const LEVELS = 5_000

/** `{"<key>":{"v":{"v":...}}}` nested `levels` deep, written as text: as a model sends it (JSON.stringify itself would overflow here). */
function nestedArgs(key: string, levels: number): string {
  return `{"${key}":${'{"v":'.repeat(levels)}"bottom"${'}'.repeat(levels)}}`
}

/** Every event's seq is its index: no gap, no repeat. */
const contiguous = (events: readonly { seq: number }[]) => events.every((event, i) => event.seq === i)

describe.each(TRANSPORTS)('values too deep to cross [%s]', (transport) => {
  it('a module tool returning a value nested 5,000 deep gives a FAILED result saying so; the turn goes on', async () => {
    const fx = setup(transport, [toolCallResponse('c1', 'deep', { levels: LEVELS }), textResponse('carried on')], { agentModule: DEEP_MODULE })
    const { result, events } = await spawnChild(fx)
    expect(result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'carried on' }] })
    expect(toolResults(events)).toEqual([
      {
        callId: 'c1',
        name: 'deep',
        isError: true,
        code: 'FAILED',
        content: [{ type: 'text', text: 'tool "deep" returned a value nested deeper than 1000 levels, which cannot be recorded' }],
      },
    ])
    expect(contiguous(events)).toBe(true)
  })

  it('a value within the limit crosses whole', async () => {
    const fx = setup(transport, [toolCallResponse('c1', 'deep', { levels: 900 }), textResponse('fine')], { agentModule: DEEP_MODULE })
    const { events } = await spawnChild(fx)
    let value = toolResults(events)[0]!.value
    let levels = 0
    while (Array.isArray(value)) [value, levels] = [value[0], levels + 1]
    expect([value, levels]).toEqual(['bottom', 900])
  })

  it('tool-call arguments nested 5,000 deep from the model are INVALID_ARGS, and the tool never runs', async () => {
    const fx = setup(transport, [toolCallResponse('c1', 'echo', nestedArgs('text', LEVELS)), textResponse('carried on')])
    const echo = echoTool()
    fx.host.tools.register(echo.tool)
    const { result, events } = await spawnChild(fx)
    expect(result.stopReason).toBe('completed')
    expect(toolResults(events)[0]).toMatchObject({ isError: true, code: 'INVALID_ARGS', content: [{ type: 'text', text: 'arguments for "echo" are nested deeper than 1000 levels' }] })
    expect(echo.calls).toHaveLength(0)
    expect(contiguous(events)).toBe(true)
  })

  it('structured_output arguments nested 5,000 deep are INVALID_ARGS; a valid report after them still counts', async () => {
    const fx = setup(transport, [toolCallResponse('s1', 'structured_output', nestedArgs('answer', LEVELS)), toolCallResponse('s2', 'structured_output', { answer: 'ok' })])
    const outputSchema = { type: 'object', properties: { answer: {} }, required: ['answer'] }
    const { result, events } = await spawnChild(fx, { outputSchema })
    expect(toolResults(events)[0]).toMatchObject({ isError: true, code: 'INVALID_ARGS', content: [{ type: 'text', text: 'arguments for "structured_output" are nested deeper than 1000 levels' }] })
    expect(result).toMatchObject({ stopReason: 'completed', structured: { answer: 'ok' } })
    expect(contiguous(events)).toBe(true)
  })
})
