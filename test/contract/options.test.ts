/**
 * Host options are checked up front, before any thread starts: a wrong value is an
 * InvalidOptionError naming the option, the value and what it may be, and an unknown key (a
 * typo such as `maxThread`) is refused, never silently ignored.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { fileURLToPath } from 'node:url'
import { createHost, createSubagentTool, InvalidOptionError, textResponse, type AgentOptions, type HostOptions } from 'subagent-worker'
import { CONTRACT_MODULE, closeHosts, ISOLATIONS, setup } from '../support/harness.js'

const BROKEN_MODULE = fileURLToPath(new URL('../fixtures/broken-module.mjs', import.meta.url))
const NOT_A_MODULE = fileURLToPath(new URL('../fixtures/not-a-module.mjs', import.meta.url))

afterEach(closeHosts)

describe.each(ISOLATIONS)('host options [%s]', (isolation) => {
  const refused = (options: object) => {
    try {
      createHost({ isolation, ...options } as HostOptions)
    } catch (error) {
      return error as InvalidOptionError
    }
    throw new Error('the host was created')
  }

  it.each([
    [{ pool: { maxThreads: Number.NaN } }, 'pool.maxThreads', 'pool.maxThreads must be a whole number from 1 to 1024, not NaN'],
    [{ pool: { maxThreads: 1.5 } }, 'pool.maxThreads', 'pool.maxThreads must be a whole number from 1 to 1024, not 1.5'],
    [{ pool: { childrenPerWorker: Number.NaN } }, 'pool.childrenPerWorker', 'pool.childrenPerWorker must be a whole number >= 1, not NaN'],
    [{ pool: { idleTimeoutMs: Number.NaN } }, 'pool.idleTimeoutMs', 'pool.idleTimeoutMs must be a whole number from 0 to 2147483647, not NaN'],
    [{ pool: { loadTimeoutMs: 0 } }, 'pool.loadTimeoutMs', 'pool.loadTimeoutMs must be a whole number from 1 to 2147483647, not 0'],
    [{ pool: { minThreads: 4, maxThreads: 2 } }, 'pool.minThreads', 'pool.minThreads must be at most pool.maxThreads (2), not 4'],
    [{ pool: { maxThread: 2 } }, 'pool.maxThread', 'pool.maxThread must be a known pool option'],
    [{ pool: { resourceLimits: { maxOldGenerationSizeMb: -1 } } }, 'pool.resourceLimits.maxOldGenerationSizeMb', 'must be a positive number of MB, not -1'],
    [{ abortGraceMs: 2 ** 31 }, 'abortGraceMs', 'abortGraceMs must be a whole number from 0 to 2147482647, not 2147483648'],
    [{ abortGraceMs: -5 }, 'abortGraceMs', 'abortGraceMs must be a whole number from 0 to 2147482647, not -5'],
    [{ maxParallelToolCalls: 0 }, 'maxParallelToolCalls', 'maxParallelToolCalls must be a whole number >= 1, not 0'],
    [{ persona: 42 }, 'persona', 'persona must be a string, not 42'],
    [{ store: {} }, 'store', 'its create() is missing'],
    [{ maxThreads: 2 }, 'maxThreads', 'maxThreads must be a known host option'],
    [{ pool: { maxQueue: -1 } }, 'pool.maxQueue', 'pool.maxQueue must be a whole number >= 0, not -1'],
    [{ pool: { niceIncrement: -1 } }, 'pool.niceIncrement', 'pool.niceIncrement must be a whole number from 0 to 19, not -1'],
    [{ pool: { niceIncrement: 20 } }, 'pool.niceIncrement', 'pool.niceIncrement must be a whole number from 0 to 19, not 20'],
    [{ pool: { niceIncrement: 2.5 } }, 'pool.niceIncrement', 'pool.niceIncrement must be a whole number from 0 to 19, not 2.5'],
    [{ pool: { env: { A: 1 } } }, 'pool.env.A', 'pool.env.A must be a string, not 1'],
    [{ pool: { env: ['A=B'] } }, 'pool.env', 'pool.env must be an object of exact values'],
    [{ isolation: 'thread' }, 'isolation', `isolation must be 'worker', 'inline' or 'process', not "thread"`],
    [{ agentModule: './agents.mjs' }, 'agentModule', "agentModule must be a URL (new URL('./agents.mjs', import.meta.url)) or an absolute path: a relative path is ambiguous"],
    [{ agentModule: 'https://example.com/agents.mjs' }, 'agentModule', 'a string names a file (an absolute path or a file: URL); give any other URL as a URL object'],
  ])('%j is refused, naming %s', (options, option, message) => {
    const error = refused(options)
    expect(error).toBeInstanceOf(InvalidOptionError)
    expect(error).toBeInstanceOf(TypeError)
    expect(error).toMatchObject({ name: 'InvalidOptionError', code: 'ERR_SUBAGENT_OPTION', option })
    expect(error.message).toContain(message)
  })

  it('an absolute path and a file URL are both accepted for agentModule', () => {
    const byPath = createHost({ isolation, agentModule: CONTRACT_MODULE })
    const byUrl = createHost({ isolation, agentModule: new URL(`file://${CONTRACT_MODULE}`) })
    return Promise.all([byPath.close(), byUrl.close()])
  })

  it('an agent module that fails to load fails the first start, and ends the first turn, with its import error', async () => {
    const fx = setup(isolation, [textResponse('never')], { agentModule: BROKEN_MODULE })
    const failure = /agent module file:.*broken-module\.mjs failed to load: Cannot find package 'subagent-worker-no-such-package'/
    await expect(fx.host.spawn.run({ prompt: 'hi', parent: fx.parent })).rejects.toThrow(failure)
    const turn = await fx.parent.run('hi')
    expect(turn).toMatchObject({ output: [], stopReason: 'error', diagnostic: expect.stringMatching(failure) })
    expect(fx.model.requests).toHaveLength(0)
  })

  it('an agent module that exports something else is named, with what is wrong', async () => {
    const fx = setup(isolation, [textResponse('never')], { agentModule: NOT_A_MODULE })
    await expect(fx.host.spawn.run({ prompt: 'hi', parent: fx.parent })).rejects.toThrow(
      /agent module file:.*not-a-module\.mjs is not a valid agent module: defineAgentModule needs an object/,
    )
  })

  it('sandbox is refused unless children run in child processes', () => {
    if (isolation === 'process') {
      createHost({ isolation, sandbox: { fsRead: ['/tmp'] } })
      return
    }
    const error = refused({ sandbox: { fsRead: ['/tmp'] } })
    expect(error).toMatchObject({ name: 'InvalidOptionError', option: 'sandbox' })
  })
})

describe('host options: the process transport', () => {
  it('a child process caps only its heap: the thread-only limits are refused, naming the two it takes', () => {
    expect(() => createHost({ isolation: 'process', pool: { resourceLimits: { stackSizeMb: 4 } } })).toThrow(
      "pool.resourceLimits.stackSizeMb must be left out with isolation: 'process' (a child process caps only its heap: maxOldGenerationSizeMb, maxYoungGenerationSizeMb), not 4",
    )
  })
})

/**
 * AgentOptions have one check (provider, model, maxTokens, subagentDepth) that createAgent,
 * resumeAgent, a start request and the subagent tool's config all use. It runs before any
 * transport is involved, so one isolation shows it.
 */
describe('agent options: one check at every entry', () => {
  const refusals: Array<[string, unknown, (what: string) => string]> = [
    ['an empty provider', { provider: '' }, (what) => `${what}.provider must be the name a model is registered under (a non-empty string), not ""`],
    ['a numeric provider', { provider: 42 }, (what) => `${what}.provider must be the name a model is registered under (a non-empty string), not 42`],
    ['an empty model', { model: '' }, (what) => `${what}.model must be a non-empty string (the model id sent with each request), not ""`],
    ['a zero maxTokens', { maxTokens: 0 }, (what) => `${what}.maxTokens must be a positive safe integer, not 0`],
    ['a fractional maxTokens', { maxTokens: 1.5 }, (what) => `${what}.maxTokens must be a positive safe integer, not 1.5`],
    ['a negative subagentDepth', { subagentDepth: -1 }, () => 'agent subagentDepth must be a non-negative safe integer'],
    ['a string', 'fast', (what) => `${what} must be an object like { provider?, model?, maxTokens? }, not "fast"`],
    ['an array', [], (what) => `${what} must be an object like { provider?, model?, maxTokens? }, not []`],
  ]

  const expectRefused = (error: unknown, message: string) => {
    expect(error).toBeInstanceOf(TypeError)
    expect(error).toMatchObject({ name: 'TypeError', code: 'ERR_SUBAGENT_AGENT_OPTIONS', message })
  }

  const thrown = (act: () => unknown): unknown => {
    try {
      act()
    } catch (error) {
      return error
    }
    throw new Error('nothing was refused')
  }

  it.each(refusals)('createAgent refuses %s', (_label, options, message) => {
    const fx = setup('inline')
    expectRefused(thrown(() => fx.host.createAgent({ options: options as AgentOptions })), message('agent options'))
    expect(fx.host.agents.list().map((agent) => agent.id)).toEqual([fx.parent.id])
  })

  it.each(refusals)('resumeAgent refuses %s, before it reads the store', async (_label, options, message) => {
    const fx = setup('inline')
    // No such session: a refusal that came after the read would say so instead.
    const error = await fx.host.resumeAgent('never-stored', options as AgentOptions).then(
      () => undefined,
      (reason: unknown) => reason,
    )
    expectRefused(error, message('resume options'))
  })

  it.each(refusals)('a start request refuses %s as its agentOptions', async (_label, options, message) => {
    const fx = setup('inline', [textResponse('never')])
    const error = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, agentOptions: options as AgentOptions }).then(
      () => undefined,
      (reason: unknown) => reason,
    )
    expectRefused(error, message('agentOptions'))
    expect(fx.model.requests).toHaveLength(0)
  })

  it.each(refusals)('the subagent tool refuses %s in its config, when it is made', (_label, options, message) => {
    const fx = setup('inline')
    expectRefused(thrown(() => createSubagentTool(fx.host, { provider: 'spawn', agentOptions: options as AgentOptions })), message('subagent tool config.agentOptions'))
  })

  it("a child's options, inherited from its parent, pass the same check", async () => {
    const fx = setup('inline', [textResponse('never')])
    const parent = { id: 'foreign', options: { provider: '' }, session: { header: { type: 'session' as const, id: 'foreign', createdAt: new Date(0).toISOString() }, events: [] } }
    const error = await fx.host.spawn.start({ prompt: 'hi', parent }).then(
      () => undefined,
      (reason: unknown) => reason,
    )
    expectRefused(error, `the child's options (inherited from the parent unless agentOptions overrides them).provider must be the name a model is registered under (a non-empty string), not ""`)
  })
})
