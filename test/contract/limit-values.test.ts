/**
 * CONTRACT.md §11, "Each value is a positive safe integer; anything else is an
 * InvalidOptionError naming it (limits.timeoutMs, ...)", on every entry point that takes limits.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { createHost, createSubagentTool, InvalidOptionError } from 'subagent-worker'
import { closeHosts, setup, TRANSPORTS } from '../support/harness.js'

afterEach(closeHosts)

const NAMES = ['timeoutMs', 'maxSteps', 'maxTotalTokens'] as const
const BAD: Array<[string, unknown]> = [
  ['0', 0],
  ['-1', -1],
  ['-0', -0],
  ['1.5', 1.5],
  ['NaN', Number.NaN],
  ['Infinity', Number.POSITIVE_INFINITY],
  ['-Infinity', Number.NEGATIVE_INFINITY],
  ['2^53', 2 ** 53],
  ["'5'", '5'],
  ['null', null],
  ['true', true],
  ['[]', []],
  ['{}', {}],
  ['5n', 5n],
  ['new Number(5)', new Number(5)],
]

function expectOptionError(error: unknown, option: string): void {
  expect(error).toBeInstanceOf(InvalidOptionError)
  expect(error).toBeInstanceOf(TypeError)
  expect(error).toMatchObject({ name: 'InvalidOptionError', code: 'ERR_SUBAGENT_OPTION', option })
  expect((error as Error).message).toContain(option)
}

function thrown(fn: () => unknown): unknown {
  try {
    fn()
  } catch (error) {
    return error
  }
  throw new Error('expected a throw')
}

async function rejected(fn: () => Promise<unknown>): Promise<unknown> {
  try {
    await fn()
  } catch (error) {
    return error
  }
  throw new Error('expected a rejection')
}

describe('§11 limit values (synchronous entry points)', () => {
  for (const name of NAMES)
    for (const [label, value] of BAD) {
      it(`createHost, createAgent and createSubagentTool refuse limits.${name} = ${label}`, () => {
        const limits = { [name]: value } as never
        expectOptionError(thrown(() => createHost({ isolation: 'inline', limits })), `limits.${name}`)
        const fixture = setup('inline')
        expectOptionError(thrown(() => fixture.host.createAgent({ limits })), `limits.${name}`)
        expectOptionError(thrown(() => createSubagentTool(fixture.host, { provider: 'spawn', limits })), `limits.${name}`)
      })
    }

  it('limits that are not an object are refused, naming limits', () => {
    for (const limits of [5, 'x', [], true]) {
      const error = thrown(() => createHost({ isolation: 'inline', limits: limits as never }))
      expect(error).toBeInstanceOf(InvalidOptionError)
      expect((error as InvalidOptionError).option).toMatch(/^limits/)
    }
  })

  it('the message names the value given', () => {
    const error = thrown(() => createHost({ isolation: 'inline', limits: { maxSteps: 1.5 } })) as Error
    expect(error.message).toContain('1.5')
  })

  it('the bounds of the valid range are accepted, and an undefined value is no limit', async () => {
    await createHost({ isolation: 'inline', limits: { timeoutMs: 1, maxSteps: Number.MAX_SAFE_INTEGER, maxTotalTokens: 1 } }).close()
    await createHost({ isolation: 'inline', limits: { timeoutMs: undefined } }).close()
    await createHost({ isolation: 'inline', limits: {} }).close()
  })
})

describe.each(TRANSPORTS)('§11 limit values on start [%s]', (transport) => {
  it('spawn.start, fork.start, spawn.run and startContinuable reject a bad limit before anything is published or requested', async () => {
    const fixture = setup(transport)
    const starts = [
      (limits: object) => fixture.host.spawn.start({ prompt: 'x', parent: fixture.parent, limits }),
      (limits: object) => fixture.host.fork.start({ prompt: 'x', parent: fixture.parent, limits }),
      (limits: object) => fixture.host.spawn.run({ prompt: 'x', parent: fixture.parent, limits }),
      (limits: object) => fixture.host.spawn.startContinuable({ prompt: 'x', parent: fixture.parent, limits }),
    ]
    const started: string[] = []
    fixture.host.on('subagent/start', (start) => started.push(start.id))
    for (const start of starts)
      for (const name of NAMES)
        for (const value of [0, -0, 2.5, Number.NaN, '10', null]) {
          expectOptionError(await rejected(() => start({ [name]: value })), `limits.${name}`)
        }
    expect(fixture.host.agents.list().map((agent) => agent.id)).toEqual([fixture.parent.id])
    expect(started).toEqual([])
    expect(fixture.model.requests).toHaveLength(0)
    const unknown = await rejected(() => fixture.host.spawn.start({ prompt: 'x', parent: fixture.parent, limits: { maxTurns: 3 } as never }))
    expect(unknown).toMatchObject({ name: 'InvalidOptionError', code: 'ERR_SUBAGENT_OPTION', option: 'limits.maxTurns' })
  })
})
