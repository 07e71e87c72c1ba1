import { afterEach, describe, expect, it } from 'vitest'
import { textResponse } from 'subagent-worker'
import { closeHosts, setup, signal, TRANSPORTS } from '../support/harness.js'

afterEach(closeHosts)

describe.each(TRANSPORTS)('smoke [%s]', (transport) => {
  it('a spawned child answers and is gone after dispose', async () => {
    const { host, parent } = setup(transport, [textResponse('hello')])
    const run = await host.spawn.start({ prompt: 'hi', parent, signal: signal() })
    expect(host.agents.get(run.id)).toBeDefined()
    expect(await run.result).toEqual({ output: [{ type: 'text', text: 'hello' }], usage: { inputTokens: 0, outputTokens: 2 }, totalUsage: { inputTokens: 0, outputTokens: 2 }, stopReason: 'completed' })
    await run.dispose()
    expect(host.agents.get(run.id)).toBeUndefined()
  })
})
