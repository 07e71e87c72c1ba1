/** §3 diagnostic: foreign error text may be quoted, but never environment values or credentials. */
import { afterEach, describe, expect, it } from 'vitest'
import { closeHosts, setup, signal, TRANSPORTS } from '../support/harness.js'

afterEach(closeHosts)

describe.each(TRANSPORTS)('§3 diagnostics are redacted [%s]', (transport) => {
  it('a model error quoting an environment value or a credential is redacted in the diagnostic', async () => {
    process.env.SW_TEST_DEPLOY_SECRET = 'hunter2-deploy-value'
    try {
      const { host, parent } = setup(transport, [
        () => {
          throw new Error('401 from upstream: api_key=abc123456789 Bearer eyJhbGciOiJIUzI1NiJ9 sk-live-0123456789abcdef env hunter2-deploy-value at https://someone:pa55word@models.test/v1')
        },
      ])
      const run = await host.spawn.start({ prompt: 'x', parent, signal: signal() })
      const { stopReason, diagnostic } = await run.result
      expect(stopReason).toBe('error')
      expect(diagnostic).toContain('401 from upstream')
      expect(diagnostic).toContain('https://[redacted]@models.test/v1')
      for (const secret of ['abc123456789', 'eyJhbGciOiJIUzI1NiJ9', 'sk-live-0123456789abcdef', 'hunter2-deploy-value', 'someone', 'pa55word']) {
        expect(diagnostic).not.toContain(secret)
      }
      await run.dispose()
    } finally {
      delete process.env.SW_TEST_DEPLOY_SECRET
    }
  })

  it('a malformed chunk is named by its type only: its arguments (tool inputs) never reach the diagnostic', async () => {
    const { host, parent } = setup(transport, [() => [{ type: 'tool-call', id: 7, name: 'echo', arguments: '{"password":"hunter2-SECRET"}' } as never]])
    const run = await host.spawn.start({ prompt: 'x', parent, signal: signal() })
    const { stopReason, diagnostic } = await run.result
    expect(stopReason).toBe('error')
    expect(diagnostic).toBe('model stream failed: the model emitted a malformed stream chunk of type "tool-call"')
    await run.dispose()
  })
})

