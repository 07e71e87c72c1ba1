/** Every error class the library throws shares one base and a stable code, and keeps its own name and `instanceof`. */
import { beforeAll, describe, expect, it } from 'vitest'
import { InvalidOptionError, ProtocolError, SessionLiveError, SubagentDepthError, ToolError, UnsupportedSchemaError } from '../../dist/index.js'
import { ModelEndpointError } from '../../dist/agent/models/endpoint-failure.js'
import { RunnerLostError } from '../../dist/parent/runners/remote-child.js'
import { messageOf, subagentError, SubagentError, SubagentTypeError } from '../../dist/protocol/errors.js'

describe('the error classes', () => {
  const cases: Array<[Error, new (...args: never[]) => Error, string, string, boolean]> = [
    [new InvalidOptionError('pool.maxThreads', 0, 'a whole number >= 1'), InvalidOptionError, 'InvalidOptionError', 'ERR_SUBAGENT_OPTION', true],
    [new UnsupportedSchemaError('no'), UnsupportedSchemaError, 'UnsupportedSchemaError', 'ERR_SUBAGENT_SCHEMA', true],
    [new SubagentDepthError(3, 2), SubagentDepthError, 'SubagentDepthError', 'ERR_SUBAGENT_DEPTH', false],
    [new ProtocolError('bad'), ProtocolError, 'ProtocolError', 'ERR_SUBAGENT_PROTOCOL', false],
    [new SessionLiveError('s1'), SessionLiveError, 'SessionLiveError', 'ERR_SUBAGENT_SESSION_LIVE', false],
    [new ModelEndpointError('down', { status: 503 }), ModelEndpointError, 'ModelEndpointError', 'ERR_SUBAGENT_MODEL_ENDPOINT', false],
    [new RunnerLostError('gone'), RunnerLostError, 'RunnerLostError', 'ERR_SUBAGENT_RUNNER_LOST', false],
  ]

  for (const [error, own, name, code, typeError] of cases) {
    it(`${name} is a SubagentError with ${code}`, () => {
      expect(error).toBeInstanceOf(own)
      expect(error).toBeInstanceOf(SubagentError)
      expect(error).toBeInstanceOf(Error)
      expect(error instanceof TypeError).toBe(typeError)
      expect(error instanceof SubagentTypeError).toBe(typeError)
      expect({ name: error.name, code: (error as SubagentError).code }).toEqual({ name, code })
    })
  }

  it('a class check stays its own: one class is not another', () => {
    expect(new ProtocolError('bad')).not.toBeInstanceOf(SessionLiveError)
    expect(new InvalidOptionError('x', 1, 'y')).not.toBeInstanceOf(UnsupportedSchemaError)
    expect(new Error('plain')).not.toBeInstanceOf(SubagentError)
    expect(new TypeError('plain')).not.toBeInstanceOf(SubagentError)
  })

  it('the factory makes the built-in kind its code names, with the built-in name', () => {
    const type = subagentError('ERR_SUBAGENT_ARGUMENT', 'x must be a string')
    expect(type).toBeInstanceOf(TypeError)
    expect(type).toBeInstanceOf(SubagentError)
    expect({ name: type.name, code: type.code, message: type.message }).toEqual({ name: 'TypeError', code: 'ERR_SUBAGENT_ARGUMENT', message: 'x must be a string' })
    const plain = subagentError('ERR_SUBAGENT_HOST_CLOSED', 'closed')
    expect(plain instanceof TypeError).toBe(false)
    expect({ name: plain.name, code: plain.code }).toEqual({ name: 'Error', code: 'ERR_SUBAGENT_HOST_CLOSED' })
  })
})

describe('messageOf: what reports an error never throws itself', () => {
  const revoked = Proxy.revocable({}, {})
  revoked.revoke()
  const cases: Array<[string, unknown, string]> = [
    ['an Error', new Error('plain'), 'plain'],
    ['a string', 'bare', 'bare'],
    ['a message-bearing object', { message: 'from a part' }, 'from a part'],
    ['plain data', { kind: 'parent' }, '{"kind":"parent"}'],
    ['a BigInt', 5n, '5'],
    ['a null-prototype object holding a BigInt', Object.assign(Object.create(null) as object, { big: 1n }), 'an unprintable object'],
    ['a revoked proxy', revoked.proxy, 'an unprintable object'],
    ['an object whose message getter throws', Object.defineProperty(Object.create(null) as object, 'message', { enumerable: true, get: () => { throw new Error('getter') } }), 'an unprintable object'],
  ]
  for (const [what, value, text] of cases) {
    it(`${what}: ${JSON.stringify(text)}`, () => expect(messageOf(value)).toBe(text))
  }
})

describe('InvalidOptionError names the value the caller gave', () => {
  const cases: Array<[string, unknown, string]> = [
    ['-0 as -0, not 0', -0, 'limits.timeoutMs must be a positive whole number, not -0'],
    ['0 as 0', 0, 'limits.timeoutMs must be a positive whole number, not 0'],
    ['a value with no text at all', Object.assign(Object.create(null) as object, { big: 1n }), 'limits.timeoutMs must be a positive whole number, not an unprintable object'],
  ]
  for (const [what, value, message] of cases) {
    it(what, () => expect(new InvalidOptionError('limits.timeoutMs', value, 'a positive whole number').message).toBe(message))
  }
})

describe('ToolError: one class across copies of the package', () => {
  // The runner's bundle of the package (no declarations of its own: it is the same package).
  const bundle = new URL('../../dist/runner/index.js', import.meta.url).href
  let RunnerToolError: typeof ToolError
  beforeAll(async () => {
    RunnerToolError = ((await import(bundle)) as typeof import('../../dist/index.js')).ToolError
  })

  it("a runner bundle's ToolError is a ToolError of tsc's files, and the other way round", () => {
    expect(RunnerToolError).not.toBe(ToolError)
    expect(new RunnerToolError('no', 'DENIED')).toBeInstanceOf(ToolError)
    expect(new ToolError('no', 'DENIED')).toBeInstanceOf(RunnerToolError)
  })

  it('a subclass keeps its own check, and nothing else passes for a ToolError', () => {
    class PolicyError extends ToolError {}
    expect(new PolicyError('no', 'DENIED')).toBeInstanceOf(ToolError)
    expect(new PolicyError('no', 'DENIED')).toBeInstanceOf(PolicyError)
    expect(new ToolError('no')).not.toBeInstanceOf(PolicyError)
    for (const value of [new Error('no'), { code: 'DENIED', message: 'no' }, 'no', null, undefined]) expect(value).not.toBeInstanceOf(ToolError)
  })
})
