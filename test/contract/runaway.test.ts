/**
 * A model that always answers with a tool call (issue 16, item 10). Inline, the loop shares the
 * host's thread: it must yield between steps so that timers, aborts and close() still run, and a
 * turn ends at the default step bound when nobody stops it.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { createHost, DEFAULT_MAX_STEPS, defineTool, type Host, type Model, type ModelRequest, type StreamChunk } from 'subagent-worker'
import { lastTurnEnd, runTopLevel } from '../support/loop-helpers.js'

/** Answers every request at once with a call of `noop`, forever; resolves `reached(n)` at the n-th request. */
class ToolCallingForever implements Model {
  requests = 0
  readonly longest: number[] = []
  readonly #waiters = new Map<number, () => void>()

  reached(n: number): Promise<void> {
    return n <= this.requests ? Promise.resolve() : new Promise((resolve) => this.#waiters.set(n, resolve))
  }

  async *stream(request: ModelRequest): AsyncGenerator<StreamChunk> {
    this.requests++
    this.longest.push(request.messages.length)
    this.#waiters.get(this.requests)?.()
    yield { type: 'tool-call', id: `c${this.requests}`, name: 'noop', arguments: '{}' }
    yield { type: 'usage', inputTokens: 1, outputTokens: 1 }
    yield { type: 'finish', reason: 'tool-calls' }
  }
}

const hosts: Host[] = []
afterEach(async () => {
  await Promise.all(hosts.splice(0).map((host) => host.close()))
})

function inlineHost(): { host: Host; model: ToolCallingForever } {
  const host = createHost({ isolation: 'inline' })
  hosts.push(host)
  const model = new ToolCallingForever()
  host.models.register('forever', model)
  host.tools.register(defineTool({ name: 'noop', description: 'does nothing', parameters: { type: 'object' }, execute: () => 'ok' }))
  return { host, model }
}

describe('a model that always calls a tool, inline', () => {
  it('AbortSignal.timeout cancels the child: the loop yields to the event loop between steps', async () => {
    const { host } = inlineHost()
    const parent = host.createAgent({ options: { provider: 'forever' } })
    const result = await host.spawn.run({ prompt: 'loop', parent, signal: AbortSignal.timeout(20) })
    expect(result.stopReason).toBe('aborted')
  })

  it('host.close() settles a child that is looping', async () => {
    const { host, model } = inlineHost()
    const parent = host.createAgent({ options: { provider: 'forever' } })
    const run = await host.spawn.start({ prompt: 'loop', parent })
    await model.reached(5)
    await host.close()
    await expect(run.result).resolves.toMatchObject({ stopReason: 'aborted' })
  })

  it('with no abort, the turn ends at the default step bound, aborted with the maxSteps limit reason', async () => {
    const { host, model } = inlineHost()
    const parent = host.createAgent({ options: { provider: 'forever' } })
    const result = await host.spawn.run({ prompt: 'loop', parent })
    expect(model.requests).toBe(DEFAULT_MAX_STEPS)
    expect(result).toMatchObject({ stopReason: 'aborted', diagnostic: `the child exceeded limits.maxSteps (${DEFAULT_MAX_STEPS} steps)` })
    // Each request carried the conversation so far: the list grew by one call and one result a step.
    expect(model.longest.at(-1)).toBe(1 + 2 * (DEFAULT_MAX_STEPS - 1))
  })

  it("a top-level agent's limits.maxSteps bounds its turn the same way", async () => {
    const { host, model } = inlineHost()
    const agent = host.createAgent({ options: { provider: 'forever' }, limits: { maxSteps: 3 } })
    const events = await runTopLevel(agent)
    expect(model.requests).toBe(3)
    expect(lastTurnEnd(events)).toEqual({ kind: 'aborted', reason: { kind: 'limit', limit: 'maxSteps', value: 3 } })
  })
})
