// CONTRACT.md §1 (Start) and bad-input errors of provider.start().
import { afterEach, describe, expect, it } from 'vitest'
import {
  createMemoryStore,
  defineTool,
  SubagentDepthError,
  textResponse,
  toolCallResponse,
  type SessionStore,
} from 'subagent-worker'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { closeHosts, eventsOf, setup as setupHost, signal, TRANSPORTS, types } from '../support/harness.js'
import {
  childEvents,
  childView,
  expectNothingPublished,
  foreignParent,
  MAX_DEPTH_MESSAGE,
  PRE_PUBLICATION,
  recordLifecycle,
  rejectionOf,
  SAFE_RANGE_MESSAGE,
  SUBAGENT_DEPTH_MESSAGE,
  toolNames,
  turnEnds,
} from '../support/driver-helpers.js'
import { fileAppears } from '../support/watch.js'

afterEach(closeHosts)

const MODULE_TOOL = fileURLToPath(new URL('../fixtures/module-tool.mjs', import.meta.url))
const NEVER_LOADS = fileURLToPath(new URL('../fixtures/never-loads-module.mjs', import.meta.url))
const OBJECT_SCHEMA = { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] }

/**
 * A host whose runners start when a child first needs one (the default keeps one warm from
 * `createHost`): most starts here are refused before anything is published, and a refused start
 * then costs no runner. The starts that publish take the on-demand path, which is a user's too.
 */
function setup(transport: (typeof TRANSPORTS)[number], script: Parameters<typeof setupHost>[1] = [], options: Parameters<typeof setupHost>[2] = {}) {
  return setupHost(transport, script, { ...options, pool: { minThreads: 0, ...options.pool } })
}

function withStore(transport: (typeof TRANSPORTS)[number], script: Parameters<typeof setup>[1] = []) {
  const store: SessionStore = createMemoryStore()
  return { ...setup(transport, script, { store }), store }
}

function noop() {
  return defineTool({ name: 'alpha', description: 'alpha tool', parameters: { type: 'object', properties: {} }, execute: () => 'alpha ran' })
}

describe.each(TRANSPORTS)('§1 start: maxDepth validation [%s]', (transport) => {
  it.each([
    ['-0', -0],
    ['1.5', 1.5],
    ['NaN', NaN],
    ['-1', -1],
    ['MAX_SAFE_INTEGER+1', Number.MAX_SAFE_INTEGER + 1],
    ['Infinity', Infinity],
    ['the string "2"', '2'],
    ['null', null],
  ])('§1.1 maxDepth %s is rejected with the exact TypeError and nothing is published', async (_label, maxDepth) => {
    const fx = withStore(transport, [textResponse('never')])
    const error = await rejectionOf(fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal(), maxDepth: maxDepth as number }))
    expect(error).toBeInstanceOf(TypeError)
    expect(error.message).toBe(MAX_DEPTH_MESSAGE)
    await expectNothingPublished(fx, { store: fx.store, agents: [fx.parent.id] })
  })

  it('§1.1 maxDepth 0 is a valid cap (it forbids delegation with a SubagentDepthError, not a TypeError)', async () => {
    const fx = setup(transport, [textResponse('never')])
    const error = await rejectionOf(fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal(), maxDepth: 0 }))
    expect(error).toBeInstanceOf(SubagentDepthError)
  })

  it('§1.1 an invalid maxDepth is reported even when the signal is already aborted (validation comes first)', async () => {
    const fx = setup(transport, [textResponse('never')])
    const controller = new AbortController()
    controller.abort()
    const error = await rejectionOf(fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: controller.signal, maxDepth: -1 }))
    expect(error).toBeInstanceOf(TypeError)
    expect(error.message).toBe(MAX_DEPTH_MESSAGE)
  })
})

describe.each(TRANSPORTS)('§1 start: pre-publication abort [%s]', (transport) => {
  it('§1.2 an already-aborted signal rejects with the pre-publication message and publishes nothing', async () => {
    const fx = withStore(transport, [textResponse('never')])
    const lifecycle = recordLifecycle(fx.host)
    const controller = new AbortController()
    controller.abort()
    const error = await rejectionOf(fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: controller.signal }))
    expect(error).toBeInstanceOf(Error)
    expect(error.message).toBe(PRE_PUBLICATION)
    await expectNothingPublished(fx, { store: fx.store, agents: [fx.parent.id] })
    expect(lifecycle.starts).toEqual([])
  })

  it('§1.2 an already-aborted signal is reported before a depth violation', async () => {
    const fx = setup(transport)
    const controller = new AbortController()
    controller.abort()
    const error = await rejectionOf(fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: controller.signal, maxDepth: 0 }))
    expect(error.message).toBe(PRE_PUBLICATION)
    expect(error).not.toBeInstanceOf(SubagentDepthError)
  })

  it('§1.2 an already-aborted signal is reported before an invalid parent subagentDepth', async () => {
    const fx = setup(transport)
    const controller = new AbortController()
    controller.abort()
    const parent = foreignParent({ options: { provider: 'scripted', subagentDepth: -1 } })
    const error = await rejectionOf(fx.host.spawn.start({ prompt: 'hi', parent, signal: controller.signal }))
    expect(error.message).toBe(PRE_PUBLICATION)
  })

  it('§1.9 an abort landing inside the creation transaction rolls back and rejects with the pre-publication message', async () => {
    const fx = withStore(transport, [textResponse('never')])
    const lifecycle = recordLifecycle(fx.host)
    const controller = new AbortController()
    const starting = fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: controller.signal })
    controller.abort()
    const error = await rejectionOf(starting)
    expect(error).toBeInstanceOf(Error)
    expect(error.message).toBe(PRE_PUBLICATION)
    await expectNothingPublished(fx, { store: fx.store, agents: [fx.parent.id] })
    expect(lifecycle.starts).toEqual([])
    expect(lifecycle.ends).toEqual([])
  })

  // On a runner the transaction spans the round trip that builds the child there: an abort while
  // the runner is still loading the module, the child placed on it and not built, lands inside it.
  it.runIf(transport === 'worker' || transport === 'process')('§1.9 an abort while the runner builds the child rolls back and rejects with the pre-publication message', async ({ onTestFinished }) => {
    const dir = await mkdtemp(join(tmpdir(), 'sw-building-'))
    onTestFinished(() => rm(dir, { recursive: true, force: true }))
    const mark = join(dir, 'loading')
    const store = createMemoryStore()
    const fx = setup(transport, [textResponse('never')], {
      store,
      agentModule: NEVER_LOADS,
      pool: { env: { SUBAGENT_NEVER_LOAD: '1', SUBAGENT_LOAD_MARK: mark } },
      ...(transport === 'process' ? { sandbox: { fsWrite: [dir] } } : {}),
    })
    const lifecycle = recordLifecycle(fx.host)
    const controller = new AbortController()
    const starting = fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: controller.signal })
    await fileAppears(mark)
    controller.abort()
    expect((await rejectionOf(starting)).message).toBe(PRE_PUBLICATION)
    await expectNothingPublished(fx, { store, agents: [fx.parent.id] })
    expect(lifecycle.starts).toEqual([])
  })

  // Inline's whole transaction is microtasks, so a sweep reaches every moment of it, up to publication and past it.
  it.runIf(transport === 'inline')('§1.9 an abort at any moment of the transaction rolls back, unless the child was published before it landed', async () => {
    const fx = withStore(transport, Array.from({ length: 40 }, () => 'hang' as const))
    let resolved = 0
    let published = 0
    fx.host.on('subagent/start', () => void published++)
    for (let k = 0; k < 40; k++) {
      const controller = new AbortController()
      const before = published
      let publishedFirst: boolean | undefined
      const starting = fx.host.spawn.start({ prompt: `moment ${k}`, parent: fx.parent, signal: controller.signal })
      let left = k
      const tick = () => {
        if (left-- > 0) return queueMicrotask(tick)
        publishedFirst = published > before
        controller.abort()
      }
      queueMicrotask(tick)
      const outcome = await starting.then(
        (run) => ({ run }),
        (error: Error) => ({ error }),
      )
      if ('error' in outcome) {
        expect(outcome.error.message).toBe(PRE_PUBLICATION)
        expect(published, `moment ${k}: rejected, yet published`).toBe(before)
      } else {
        // Published before the abort landed, or resolved before it landed at all (the abort then cancels the running child).
        expect(publishedFirst, `moment ${k}: the abort landed before publication, yet start() resolved`).not.toBe(false)
        expect(await outcome.run.result).toMatchObject({ stopReason: 'aborted' })
        await outcome.run.dispose()
        resolved++
      }
    }
    // Sessions are stored for the published children alone (the store keeps a disposed child's).
    expect(published).toBe(resolved)
    expect((await fx.store.list()).sessions.filter(({ id }) => id !== fx.parent.id)).toHaveLength(resolved)
    expect(fx.host.agents.list().map(({ id }) => id)).toEqual([fx.parent.id])
  })

  it('§1.9 a host closed by a subagent/start listener settles that run aborted before close() resolves, and keeps nothing of it', async () => {
    const fx = setup(transport, ['hang'])
    let closing: Promise<void> | undefined
    fx.host.on('subagent/start', () => void (closing ??= fx.host.close()))
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent })
    await closing
    expect(fx.host.agents.get(run.id)).toBeUndefined()
    expect(await run.result).toMatchObject({ stopReason: 'aborted' })
  })

  it('§1.9 an abort inside the creation transaction of a composed child (filter, persona, schema) also rolls back completely', async () => {
    const fx = withStore(transport, [textResponse('never')])
    fx.host.tools.register(noop())
    const controller = new AbortController()
    const starting = fx.host.fork.start({
      prompt: 'hi',
      parent: fx.parent,
      signal: controller.signal,
      toolFilter: { allow: ['alpha'] },
      persona: 'short-lived persona',
      outputSchema: OBJECT_SCHEMA,
      label: 'doomed',
    })
    controller.abort()
    expect((await rejectionOf(starting)).message).toBe(PRE_PUBLICATION)
    await expectNothingPublished(fx, { store: fx.store, agents: [fx.parent.id] })
  })
})

describe.each(TRANSPORTS)('§1 start: delegation depth [%s]', (transport) => {
  it.each([
    ['-1', -1],
    ['1.5', 1.5],
    ['NaN', NaN],
    ['Infinity', Infinity],
    ['MAX_SAFE_INTEGER+1', Number.MAX_SAFE_INTEGER + 1],
    ['the string "1"', '1'],
  ])('§1.3 a parent runtime subagentDepth of %s throws the exact TypeError and publishes nothing', async (_label, subagentDepth) => {
    const fx = withStore(transport, [textResponse('never')])
    const parent = foreignParent({ options: { provider: 'scripted', subagentDepth } })
    const error = await rejectionOf(fx.host.spawn.start({ prompt: 'hi', parent, signal: signal() }))
    expect(error).toBeInstanceOf(TypeError)
    expect(error.message).toBe(SUBAGENT_DEPTH_MESSAGE)
    await expectNothingPublished(fx, { store: fx.store, agents: [fx.parent.id] })
  })

  it('§1.3 exceeding maxDepth throws SubagentDepthError with name, attemptedDepth, maxDepth and the exact message', async () => {
    const fx = withStore(transport, [textResponse('never')])
    const parent = foreignParent({ header: { delegationDepth: 2 } })
    const error = (await rejectionOf(fx.host.spawn.start({ prompt: 'hi', parent, signal: signal(), maxDepth: 2 }))) as SubagentDepthError
    expect(error).toBeInstanceOf(SubagentDepthError)
    expect(error).toBeInstanceOf(Error)
    expect(error.name).toBe('SubagentDepthError')
    expect(error.attemptedDepth).toBe(3)
    expect(error.maxDepth).toBe(2)
    expect(error.message).toBe('subagent depth 3 exceeds maxDepth 2')
    await expectNothingPublished(fx, { store: fx.store, agents: [fx.parent.id] })
  })

  it('§1.3 a top-level parent (depth 0) with maxDepth 0 is refused: attempted depth 1', async () => {
    const fx = setup(transport)
    const error = (await rejectionOf(fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal(), maxDepth: 0 }))) as SubagentDepthError
    expect(error.name).toBe('SubagentDepthError')
    expect(error.message).toBe('subagent depth 1 exceeds maxDepth 0')
    expect([error.attemptedDepth, error.maxDepth]).toEqual([1, 0])
  })

  it('§1.3 a child depth equal to maxDepth is allowed', async () => {
    const fx = setup(transport, [textResponse('ok')])
    const parent = foreignParent({ header: { delegationDepth: 1 } })
    const run = await fx.host.spawn.start({ prompt: 'hi', parent, signal: signal(), maxDepth: 2 })
    expect(childView(fx.host, run).options.subagentDepth).toBe(2)
    expect((await run.result).stopReason).toBe('completed')
    await run.dispose()
  })

  it('§1.3 the persisted header is authoritative: a lower runtime subagentDepth cannot lower the depth', async () => {
    const fx = setup(transport, [textResponse('ok')])
    const parent = foreignParent({ options: { provider: 'scripted', subagentDepth: 0 }, header: { delegationDepth: 2 } })
    const run = await fx.host.spawn.start({ prompt: 'hi', parent, signal: signal() })
    const view = childView(fx.host, run)
    expect(view.options.subagentDepth).toBe(3)
    expect(view.session.header.delegationDepth).toBe(3)
    const refused = (await rejectionOf(fx.host.spawn.start({ prompt: 'hi', parent, signal: signal(), maxDepth: 2 }))) as SubagentDepthError
    expect(refused.attemptedDepth).toBe(3)
    await run.dispose()
  })

  it('§1.3 runtime options may deepen the count beyond the header', async () => {
    const fx = setup(transport, [textResponse('ok')])
    const parent = foreignParent({ options: { provider: 'scripted', subagentDepth: 4 }, header: { delegationDepth: 1 } })
    const run = await fx.host.spawn.start({ prompt: 'hi', parent, signal: signal() })
    const view = childView(fx.host, run)
    expect(view.options.subagentDepth).toBe(5)
    expect(view.session.header.delegationDepth).toBe(5)
    const refused = (await rejectionOf(fx.host.spawn.start({ prompt: 'hi', parent, signal: signal(), maxDepth: 4 }))) as SubagentDepthError
    expect(refused.message).toBe('subagent depth 5 exceeds maxDepth 4')
    await run.dispose()
  })

  it('§1.3 a child of a host-created child counts from the child (depth 2)', async () => {
    const fx = setup(transport, [textResponse('first'), textResponse('second')])
    const first = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    await first.result
    const second = await fx.host.spawn.start({ prompt: 'again', parent: childView(fx.host, first), signal: signal(), maxDepth: 2 })
    expect(childView(fx.host, second).session.header.delegationDepth).toBe(2)
    expect(childView(fx.host, second).options.subagentDepth).toBe(2)
    const error = (await rejectionOf(fx.host.spawn.start({ prompt: 'x', parent: childView(fx.host, second), signal: signal(), maxDepth: 2 }))) as SubagentDepthError
    expect(error.message).toBe('subagent depth 3 exceeds maxDepth 2')
    await Promise.all([second.result, first.dispose(), second.dispose()])
  })

  it('§1.3 a child depth outside the safe-integer range throws the exact RangeError (header at MAX_SAFE_INTEGER)', async () => {
    const fx = withStore(transport)
    const parent = foreignParent({ header: { delegationDepth: Number.MAX_SAFE_INTEGER } })
    const error = await rejectionOf(fx.host.spawn.start({ prompt: 'hi', parent, signal: signal() }))
    expect(error).toBeInstanceOf(RangeError)
    expect(error.message).toBe(SAFE_RANGE_MESSAGE)
    // Every error the library throws carries a stable code (docs/design.md).
    expect(error).toMatchObject({ name: 'RangeError', code: 'ERR_SUBAGENT_DEPTH_RANGE' })
    await expectNothingPublished(fx, { store: fx.store, agents: [fx.parent.id] })
  })

  it('§1.3 a child depth outside the safe-integer range throws the RangeError before comparing with maxDepth (options at MAX_SAFE_INTEGER)', async () => {
    const fx = setup(transport)
    const parent = foreignParent({ options: { provider: 'scripted', subagentDepth: Number.MAX_SAFE_INTEGER } })
    const error = await rejectionOf(fx.host.spawn.start({ prompt: 'hi', parent, signal: signal(), maxDepth: 3 }))
    expect(error).toBeInstanceOf(RangeError)
    expect(error).not.toBeInstanceOf(SubagentDepthError)
    expect(error.message).toBe(SAFE_RANGE_MESSAGE)
  })

  it('§1.3 a depth violation is reported before an invalid outputSchema', async () => {
    const fx = setup(transport)
    const error = await rejectionOf(fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal(), maxDepth: 0, outputSchema: { type: 'string' } }))
    expect(error).toBeInstanceOf(SubagentDepthError)
  })
})

describe.each(TRANSPORTS)('§1 start: outputSchema validation [%s]', (transport) => {
  const circular: Record<string, unknown> = { type: 'object', properties: {} }
  ;(circular['properties'] as Record<string, unknown>)['self'] = circular

  it.each([
    ['a non-object root', { type: 'string' }],
    ['a root without a type', { properties: { a: { type: 'string' } } }],
    ['an array', [{ type: 'object' }]],
    ['an unsupported keyword ($ref)', { type: 'object', properties: { a: { $ref: '#/definitions/a' } }, definitions: { a: { type: 'string' } } }],
    ['an unsupported keyword (oneOf)', { type: 'object', oneOf: [{ required: ['a'] }, { required: ['b'] }] }],
    ['an unknown type name', { type: 'object', properties: { a: { type: 'text' } } }],
    ['a function (not JSON)', { type: 'object', properties: { a: { type: 'string', default: () => 'x' } } }],
    ['a bigint (not JSON)', { type: 'object', properties: { a: { type: 'integer', default: 10n } } }],
    ['a NaN (not JSON)', { type: 'object', properties: { a: { type: 'number', minimum: NaN } } }],
    ['a Date (not JSON)', { type: 'object', properties: { a: { type: 'string', default: new Date(0) } } }],
    ['a circular reference (not JSON)', circular],
  ])('§1.4 an outputSchema with %s rejects before any child exists', async (_label, outputSchema) => {
    const fx = withStore(transport, [textResponse('never')])
    const lifecycle = recordLifecycle(fx.host)
    const error = await rejectionOf(fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal(), outputSchema: outputSchema as object }))
    expect(error).toBeInstanceOf(Error)
    expect(error.message).not.toBe(PRE_PUBLICATION)
    await expectNothingPublished(fx, { store: fx.store, agents: [fx.parent.id] })
    expect(lifecycle.starts).toEqual([])
  })

  it.each([
    ['duplicate "required" names', { type: 'object', properties: { a: { type: 'string' } }, required: ['a', 'a'] }],
    ['"multipleOf": 0', { type: 'object', properties: { a: { type: 'number', multipleOf: 0 } } }],
    ['a duplicated type list', { type: 'object', properties: { a: { type: ['string', 'string'] } } }],
    ['an enum listing a value twice', { type: 'object', properties: { a: { enum: ['x', 'x'] } } }],
  ])('§1.4 an outputSchema that is not a valid JSON Schema (%s) rejects before any child exists', async (_label, outputSchema) => {
    const fx = withStore(transport, [textResponse('never')])
    const lifecycle = recordLifecycle(fx.host)
    const starting = fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal(), outputSchema })
    const error = await rejectionOf(starting)
    expect(error).toBeInstanceOf(Error)
    expect(error.message).not.toBe(PRE_PUBLICATION)
    await expectNothingPublished(fx, { store: fx.store, agents: [fx.parent.id] })
    expect(lifecycle.starts).toEqual([])
  })

  it('§1.4 a supported object-rooted schema is accepted', async () => {
    const fx = setup(transport, [toolCallResponse('s1', 'structured_output', { answer: '42' })])
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal(), outputSchema: OBJECT_SCHEMA })
    expect(await run.result).toMatchObject({ structured: { answer: '42' }, stopReason: 'completed' })
    await run.dispose()
  })

  it('§1.4 an invalid outputSchema is reported before an unknown toolFilter name', async () => {
    const fx = setup(transport)
    const error = await rejectionOf(
      fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal(), outputSchema: { type: 'string' }, toolFilter: { deny: ['no_such_tool'] } }),
    )
    expect(error.message).not.toContain('unknown global tool')
  })
})

describe.each(TRANSPORTS)('§1 start: toolFilter [%s]', (transport) => {
  it.each([
    ['allow', { allow: ['no_such_tool'] }],
    ['deny', { deny: ['no_such_tool'] }],
    ['allow (one known, one unknown)', { allow: ['alpha', 'no_such_tool'] }],
  ])('§1.5 an unknown name in toolFilter.%s rejects with "unknown global tool" and publishes nothing', async (_label, toolFilter) => {
    const fx = withStore(transport, [textResponse('never')])
    fx.host.tools.register(noop())
    const lifecycle = recordLifecycle(fx.host)
    const error = await rejectionOf(fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal(), toolFilter }))
    expect(error).toBeInstanceOf(Error)
    expect(error.message).toContain('unknown global tool')
    await expectNothingPublished(fx, { store: fx.store, agents: [fx.parent.id] })
    expect(lifecycle.starts).toEqual([])
  })

  it('§1.5 an unknown toolFilter name is reported before a bad agentOptions value (§1.6 comes after)', async () => {
    const fx = setup(transport)
    fx.host.tools.register(noop())
    const error = await rejectionOf(
      fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal(), toolFilter: { deny: ['no_such_tool'] }, agentOptions: { maxTokens: -1 } }),
    )
    expect(error.message).toContain('unknown global tool')
  })

  it('§1.5 a filter naming only existing global tools is accepted', async () => {
    const fx = setup(transport, [textResponse('ok')])
    fx.host.tools.register(noop())
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal(), toolFilter: { deny: ['alpha'] } })
    expect((await run.result).stopReason).toBe('completed')
    await run.dispose()
  })

  it('§1.5 agent-module tools count among the tools a filter may name (and may hide)', async () => {
    const fx = setup(transport, [toolCallResponse('c1', 'module_echo', { text: 'x' }), textResponse('done')], { agentModule: MODULE_TOOL })
    fx.host.tools.register(noop())
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal(), toolFilter: { deny: ['module_echo'] } })
    expect((await run.result).stopReason).toBe('completed')
    expect(toolNames(fx.model.requests[0]!)).toEqual(['alpha'])
    expect(eventsOf(childEvents(fx.host, run), 'tool/result')).toEqual([expect.objectContaining({ callId: 'c1', isError: true, code: 'UNKNOWN_TOOL' })])
    await run.dispose()
    const error = await rejectionOf(fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal(), toolFilter: { allow: ['module_echoo'] } }))
    expect(error.message).toContain('unknown global tool')
  })

  it('§1.8 a denied tool vanishes from the model request and refuses to execute', async () => {
    const fx = setup(transport, [toolCallResponse('c1', 'beta', {}), textResponse('done')])
    let betaRan = 0
    fx.host.tools.register(noop())
    fx.host.tools.register(defineTool({ name: 'beta', description: 'beta tool', parameters: { type: 'object', properties: {} }, execute: () => void betaRan++ }))
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal(), toolFilter: { deny: ['beta'] } })
    expect((await run.result).stopReason).toBe('completed')
    expect(toolNames(fx.model.requests[0]!)).toEqual(['alpha'])
    const [result] = eventsOf<{ callId: string; isError: boolean; code?: string }>(childEvents(fx.host, run), 'tool/result')
    expect(result).toMatchObject({ callId: 'c1', isError: true, code: 'UNKNOWN_TOOL' })
    expect(betaRan).toBe(0)
    await run.dispose()
  })

  it('§1.8 a tool outside the allow list vanishes from the model request and refuses to execute', async () => {
    const fx = setup(transport, [toolCallResponse('c1', 'beta', {}), textResponse('done')])
    let betaRan = 0
    fx.host.tools.register(noop())
    fx.host.tools.register(defineTool({ name: 'beta', description: 'beta tool', parameters: { type: 'object', properties: {} }, execute: () => void betaRan++ }))
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal(), toolFilter: { allow: ['alpha'] } })
    await run.result
    expect(toolNames(fx.model.requests[0]!)).toEqual(['alpha'])
    const [result] = eventsOf<{ isError: boolean; code?: string }>(childEvents(fx.host, run), 'tool/result')
    expect(result).toMatchObject({ isError: true, code: 'UNKNOWN_TOOL' })
    expect(betaRan).toBe(0)
    await run.dispose()
  })
})

describe.each(TRANSPORTS)('§1 start: malformed parents [%s]', (transport) => {
  const good = foreignParent()
  it.each([
    ['null', null],
    ['a string', 'parent'],
    ['an empty object', {}],
    ['an empty id', { ...good, id: '' }],
    ['a numeric id', { ...good, id: 7 }],
    ['no options', { id: 'p', session: good.session }],
    ['null options', { ...good, options: null }],
    ['no session', { id: 'p', options: {} }],
    ['a null header', { ...good, session: { header: null, events: [] } }],
    ['events that are not an array', { ...good, session: { header: good.session.header, events: {} } }],
  ])('§1 a parent that is %s is rejected with a TypeError and nothing is published', async (_label, parent) => {
    const fx = withStore(transport, [textResponse('never')])
    const error = await rejectionOf(fx.host.spawn.start({ prompt: 'hi', parent: parent as never, signal: signal() }))
    expect(error).toBeInstanceOf(TypeError)
    await expectNothingPublished(fx, { store: fx.store, agents: [fx.parent.id] })
  })

  it.each([
    ['a numeric prompt', { prompt: 42 }],
    ['a prompt with a malformed content block', { prompt: [{ type: 'image', url: 'x' }] }],
    ['agentOptions that are not an object', { agentOptions: 'fast' }],
    ['agentOptions with a negative maxTokens', { agentOptions: { maxTokens: -1 } }],
    ['agentOptions with an empty provider', { agentOptions: { provider: '' } }],
    ['a non-string label', { label: 7 }],
    ['a non-string persona', { persona: { text: 'x' } }],
    ['a toolFilter that is not an object', { toolFilter: ['alpha'] }],
    ['a toolFilter whose allow is not a list', { toolFilter: { allow: 'alpha' } }],
    ['a signal that is not an AbortSignal', { signal: { aborted: false } }],
  ])('§1 a request with %s is rejected with a TypeError and nothing is published', async (_label, patch) => {
    const fx = withStore(transport, [textResponse('never')])
    fx.host.tools.register(noop())
    const request = { prompt: 'hi', parent: fx.parent, signal: signal(), ...patch }
    const error = await rejectionOf(fx.host.spawn.start(request as never))
    expect(error).toBeInstanceOf(TypeError)
    await expectNothingPublished(fx, { store: fx.store, agents: [fx.parent.id] })
  })

  it('§1 any object shaped { id, options, session: { header, events } } is a valid parent', async () => {
    const fx = setup(transport, [textResponse('from a foreign parent')])
    const parent = foreignParent({ id: 'outside-harness' })
    const run = await fx.host.spawn.start({ prompt: 'hi', parent, signal: signal() })
    expect(childView(fx.host, run).session.header.parentSession).toBe('outside-harness')
    expect(await run.result).toEqual({ output: [{ type: 'text', text: 'from a foreign parent' }], usage: { inputTokens: 0, outputTokens: 6 }, totalUsage: { inputTokens: 0, outputTokens: 6 }, stopReason: 'completed' })
    await run.dispose()
  })
})

describe.each(TRANSPORTS)('§1 start: child identity and options [%s]', (transport) => {
  it('§1.6 each child gets a fresh session id, distinct from the parent and from siblings', async () => {
    const fx = setup(transport, [textResponse('a'), textResponse('b')])
    const a = await fx.host.spawn.start({ prompt: 'a', parent: fx.parent, signal: signal() })
    const b = await fx.host.spawn.start({ prompt: 'b', parent: fx.parent, signal: signal() })
    expect(typeof a.id).toBe('string')
    expect(a.id).not.toBe('')
    expect(new Set([a.id, b.id, fx.parent.id]).size).toBe(3)
    expect(childView(fx.host, a).session.header.id).toBe(a.id)
    expect(childView(fx.host, b).session.header.id).toBe(b.id)
    await Promise.all([a.result, b.result])
    await Promise.all([a.dispose(), b.dispose()])
  })

  it("§1.6 the child inherits the parent's provider, model and maxTokens, plus subagentDepth", async () => {
    const fx = setup(transport, [textResponse('ok')])
    const parent = fx.host.createAgent({ options: { provider: 'scripted', model: 'scripted-7', maxTokens: 77 } })
    const run = await fx.host.spawn.start({ prompt: 'hi', parent, signal: signal() })
    expect(childView(fx.host, run).options).toEqual({ provider: 'scripted', model: 'scripted-7', maxTokens: 77, subagentDepth: 1 })
    await run.result
    expect(fx.model.requests[0]).toMatchObject({ model: 'scripted-7', maxTokens: 77 })
    await run.dispose()
  })

  it('§1.6 agentOptions override the inherited provider, model and maxTokens', async () => {
    const fx = setup(transport, [textResponse('ok')])
    const parent = fx.host.createAgent({ options: { provider: 'nowhere', model: 'm-1', maxTokens: 10 } })
    const run = await fx.host.spawn.start({
      prompt: 'hi',
      parent,
      signal: signal(),
      agentOptions: { provider: 'scripted', model: 'override-model', maxTokens: 321 },
    })
    expect(childView(fx.host, run).options).toEqual({ provider: 'scripted', model: 'override-model', maxTokens: 321, subagentDepth: 1 })
    expect((await run.result).stopReason).toBe('completed')
    expect(fx.model.requests[0]).toMatchObject({ model: 'override-model', maxTokens: 321 })
    await run.dispose()
  })

  it('§1.6 a partial override keeps the other inherited options', async () => {
    const fx = setup(transport, [textResponse('ok')])
    const parent = fx.host.createAgent({ options: { provider: 'scripted', model: 'm-1', maxTokens: 10 } })
    const run = await fx.host.spawn.start({ prompt: 'hi', parent, signal: signal(), agentOptions: { maxTokens: 99 } })
    expect(childView(fx.host, run).options).toEqual({ provider: 'scripted', model: 'm-1', maxTokens: 99, subagentDepth: 1 })
    await run.result
    await run.dispose()
  })

  it('§1.6 nothing else is invented or copied: foreign option keys of the parent or of agentOptions stay behind', async () => {
    const fx = setup(transport, [textResponse('ok')])
    const parent = foreignParent({ options: { provider: 'scripted', model: 'm-2', maxTokens: 5, temperature: 0.2, subagentDepth: 0 } })
    const run = await fx.host.spawn.start({ prompt: 'hi', parent, signal: signal(), agentOptions: { extra: true } as never })
    expect(childView(fx.host, run).options).toEqual({ provider: 'scripted', model: 'm-2', maxTokens: 5, subagentDepth: 1 })
    await run.result
    await run.dispose()
  })

  it('§1.6 a parent with no route and no override yields options exactly { subagentDepth: 1 } and a turn ending in error', async () => {
    const fx = setup(transport, [textResponse('never')])
    const parent = fx.host.createAgent()
    const run = await fx.host.spawn.start({ prompt: 'hi', parent, signal: signal() })
    expect(childView(fx.host, run).options).toEqual({ subagentDepth: 1 })
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.output).toEqual([])
    const ends = turnEnds(childEvents(fx.host, run))
    expect(ends).toHaveLength(1)
    expect(ends[0]).toMatchObject({ kind: 'error', message: expect.any(String) })
    expect(fx.model.requests).toHaveLength(0)
    await run.dispose()
  })

  it('§1.6 an unregistered model name ends the child turn in error and the result is error', async () => {
    const fx = setup(transport, [textResponse('never')])
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal(), agentOptions: { provider: 'not-registered' } })
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.output).toEqual([])
    const ends = turnEnds(childEvents(fx.host, run))
    expect(ends).toHaveLength(1)
    expect(ends[0]).toMatchObject({ kind: 'error', message: expect.any(String) })
    expect(fx.model.requests).toHaveLength(0)
    await run.dispose()
  })
})

describe.each(TRANSPORTS)('§1 start: child header [%s]', (transport) => {
  it("§1.7 the header records parentSession, origin 'subagent', delegationDepth and the parent's cwd", async () => {
    const store = createMemoryStore()
    const fx = setup(transport, [textResponse('ok')], { store })
    const parent = fx.host.createAgent({ options: { provider: 'scripted' }, header: { cwd: '/srv/project' } })
    const run = await fx.host.spawn.start({ prompt: 'hi', parent, signal: signal() })
    const header = childView(fx.host, run).session.header
    expect(header).toMatchObject({ id: run.id, parentSession: parent.id, origin: 'subagent', delegationDepth: 1, cwd: '/srv/project' })
    expect(header).not.toHaveProperty('seedLength')
    await run.result
    await run.dispose()
    const stored = await store.read(run.id)
    expect(stored?.header).toMatchObject({ id: run.id, parentSession: parent.id, origin: 'subagent', delegationDepth: 1, cwd: '/srv/project' })
  })

  it('§1.7 a parent without cwd gives a header without cwd', async () => {
    const fx = setup(transport, [textResponse('ok')])
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    expect(childView(fx.host, run).session.header).not.toHaveProperty('cwd')
    await run.result
    await run.dispose()
  })

  it('§1.7 delegationDepth is durable: the stored header keeps it after the child is gone', async () => {
    const store = createMemoryStore()
    const fx = setup(transport, [textResponse('ok')], { store })
    const parent = foreignParent({ header: { delegationDepth: 4 } })
    const run = await fx.host.spawn.start({ prompt: 'hi', parent, signal: signal() })
    await run.result
    await run.dispose()
    expect(fx.host.agents.get(run.id)).toBeUndefined()
    expect((await store.read(run.id))?.header.delegationDepth).toBe(5)
    expect((await store.list()).sessions.find((h) => h.id === run.id)?.delegationDepth).toBe(5)
  })
})

describe.each(TRANSPORTS)('§1 start: composition [%s]', (transport) => {
  it('§1.8 the child request carries a delegation-scope system prompt that a plain top-level agent does not get', async () => {
    const fx = setup(transport, [textResponse('parent'), textResponse('child')])
    fx.parent.followup('top-level turn')
    await fx.parent.whenIdle()
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    await run.result
    expect(fx.model.requests[0]!.system).toBeUndefined()
    expect(typeof fx.model.requests[1]!.system).toBe('string')
    expect(fx.model.requests[1]!.system!.trim()).not.toBe('')
    await run.dispose()
  })

  it('§1.8 the persona shadows the deployment persona for this child only', async () => {
    const fx = setup(transport, [textResponse('a'), textResponse('b')], { persona: 'DEPLOYMENT-PERSONA' })
    const withPersona = await fx.host.spawn.start({ prompt: 'a', parent: fx.parent, signal: signal(), persona: 'CHILD-PERSONA' })
    await withPersona.result
    const plain = await fx.host.spawn.start({ prompt: 'b', parent: fx.parent, signal: signal() })
    await plain.result
    const [first, second] = fx.model.requests
    expect(first!.system).toContain('CHILD-PERSONA')
    expect(first!.system).not.toContain('DEPLOYMENT-PERSONA')
    // the delegation scope statement is still there besides the persona
    expect(first!.system!.replace('CHILD-PERSONA', '').trim()).not.toBe('')
    expect(second!.system).toContain('DEPLOYMENT-PERSONA')
    expect(second!.system).not.toContain('CHILD-PERSONA')
    await Promise.all([withPersona.dispose(), plain.dispose()])
  })

  it("§1.8 the subagent/descriptor event { mode: 'one-shot', provider, label } is appended in the first turn before the first model request", async () => {
    const fx = setup(transport, [toolCallResponse('c1', 'alpha', {}, 'step one'), textResponse('step two')])
    fx.host.tools.register(noop())
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal(), label: 'research task' })
    await run.result
    const events = childEvents(fx.host, run)
    expect(eventsOf(events, 'subagent/descriptor')).toEqual([{ mode: 'one-shot', provider: 'spawn', label: 'research task' }])
    const list = types(events)
    const descriptor = list.indexOf('subagent/descriptor')
    expect(descriptor).toBeGreaterThan(list.indexOf('turn/start'))
    expect(descriptor).toBeLessThan(list.indexOf('assistant/chunk'))
    expect(descriptor).toBeLessThan(list.indexOf('assistant/message'))
    expect(descriptor).toBeLessThan(list.indexOf('turn/end'))
    await run.dispose()
  })

  it('§1.8 without a label the descriptor has no label field', async () => {
    const fx = setup(transport, [textResponse('ok')])
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    await run.result
    expect(eventsOf(childEvents(fx.host, run), 'subagent/descriptor')).toEqual([{ mode: 'one-shot', provider: 'spawn' }])
    await run.dispose()
  })

  it('§1.9 start() fulfils only after publication: the child is already in host.agents', async () => {
    const fx = setup(transport, ['hang'])
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    expect(fx.host.agents.get(run.id)?.id).toBe(run.id)
    expect(fx.host.agents.list().map((a) => a.id)).toContain(run.id)
    await run.dispose()
  })

  it('§1.9 an abort in the hand-off gap does not reject: the run keeps its id and settles { output: [], stopReason: aborted }', async () => {
    const fx = setup(transport, [textResponse('never')])
    const controller = new AbortController()
    let published: string | undefined
    fx.host.on('subagent/start', (info) => {
      published = info.id
      controller.abort()
    })
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: controller.signal })
    expect(published).toBeDefined()
    expect(run.id).toBe(published)
    expect(await run.result).toEqual({ output: [], stopReason: 'aborted' })
    await run.dispose()
    expect(fx.host.agents.get(run.id)).toBeUndefined()
  })

  it("§1 registrations belong to one child: concurrent children never see each other's persona, filter or schema", async () => {
    const answer = (request: { tools?: Array<{ name: string }> }) =>
      toolNames(request).includes('structured_output') ? toolCallResponse('s1', 'structured_output', { answer: 'A' }) : textResponse('plain')
    const fx = setup(transport, [answer, answer, answer])
    fx.host.tools.register(noop())
    fx.host.tools.register(defineTool({ name: 'beta', description: 'beta', parameters: { type: 'object', properties: {} }, execute: () => 'b' }))
    const [a, b] = await Promise.all([
      fx.host.spawn.start({ prompt: 'a', parent: fx.parent, signal: signal(), persona: 'PERSONA-A', toolFilter: { deny: ['beta'] }, outputSchema: OBJECT_SCHEMA }),
      fx.host.spawn.start({ prompt: 'b', parent: fx.parent, signal: signal() }),
    ])
    const [ra, rb] = await Promise.all([a!.result, b!.result])
    expect(ra).toEqual({ output: [{ type: 'tool-call', id: 's1', name: 'structured_output', arguments: JSON.stringify({ answer: 'A' }) }], structured: { answer: 'A' }, usage: { inputTokens: 0, outputTokens: 4 }, totalUsage: { inputTokens: 0, outputTokens: 4 }, stopReason: 'completed' })
    expect(rb).toEqual({ output: [{ type: 'text', text: 'plain' }], usage: { inputTokens: 0, outputTokens: 2 }, totalUsage: { inputTokens: 0, outputTokens: 2 }, stopReason: 'completed' })
    const requestA = fx.model.requests.find((r) => r.system?.includes('PERSONA-A'))!
    const requestB = fx.model.requests.find((r) => !r.system?.includes('PERSONA-A'))!
    expect(toolNames(requestA).sort()).toEqual(['alpha', 'structured_output'])
    expect(toolNames(requestB).sort()).toEqual(['alpha', 'beta'])
    await Promise.all([a!.dispose(), b!.dispose()])

    // no residue: a later child sees neither A's persona, nor its filter, nor its schema tool
    const c = await fx.host.spawn.start({ prompt: 'c', parent: fx.parent, signal: signal() })
    expect((await c.result).stopReason).toBe('completed')
    const requestC = fx.model.requests[2]!
    expect(requestC.system).not.toContain('PERSONA-A')
    expect(toolNames(requestC).sort()).toEqual(['alpha', 'beta'])
    expect(fx.host.tools.list().map((t) => t.name).sort()).toEqual(['alpha', 'beta'])
    await c.dispose()
    expect(fx.host.agents.list().map((x) => x.id)).toEqual([fx.parent.id])
  })
})
