/**
 * Untrusted schemas get a clear error, fast: an `outputSchema` or tool `parameters` beyond
 * SCHEMA_LIMITS (nesting, values, subschemas) is refused with an UnsupportedSchemaError naming
 * the limit, before any child exists, never a bare stack overflow or a start that blocks the host
 * for seconds. Schemas within the limits work as before.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { defineTool, SCHEMA_LIMITS, textResponse, toolCallResponse, UnsupportedSchemaError } from 'subagent-worker'
import { closeHosts, setup, TRANSPORTS } from '../support/harness.js'

afterEach(closeHosts)

/** `levels` nested `properties`, as in the probe that overflowed the stack. */
function deepProperties(levels: number): object {
  let node: object = { type: 'string' }
  for (let i = 0; i < levels; i++) node = { type: 'object', properties: { x: node } }
  return node
}

/** `levels` nested `anyOf`s under one property. */
function deepAnyOf(levels: number): object {
  let node: object = { type: 'string' }
  for (let i = 0; i < levels; i++) node = { anyOf: [node] }
  return { type: 'object', properties: { x: node } }
}

const manyProperties = (count: number) => ({ type: 'object', properties: Object.fromEntries(Array.from({ length: count }, (_, i) => [`p${i}`, { type: 'string' }])) })
const bigEnum = (count: number) => ({ type: 'object', properties: { e: { enum: Array.from({ length: count }, (_, i) => `v${i}`) } } })

const TOO_LARGE = [
  ['a 20,000-deep properties chain', () => deepProperties(20_000), `more than ${SCHEMA_LIMITS.depth} levels of nesting`],
  ['a 200,000-deep anyOf', () => deepAnyOf(200_000), `more than ${SCHEMA_LIMITS.depth} levels of nesting`],
  ['50,000 properties', () => manyProperties(50_000), `more than ${SCHEMA_LIMITS.values} values`],
  ['an enum of 100,000 entries', () => bigEnum(100_000), `more than ${SCHEMA_LIMITS.values} values`],
  [`${SCHEMA_LIMITS.subschemas + 1} properties`, () => manyProperties(SCHEMA_LIMITS.subschemas), `more than ${SCHEMA_LIMITS.subschemas} subschemas`],
] as const

describe.each(TRANSPORTS)('schema limits [%s]', (transport) => {
  it.each(TOO_LARGE)('an outputSchema with %s is refused before any child exists, naming the limit', async (_, schema, limit) => {
    const fx = setup(transport, [textResponse('never')])
    const started = fx.host.spawn.start({ prompt: 'x', parent: fx.parent, outputSchema: schema() })
    await expect(started).rejects.toThrow(UnsupportedSchemaError)
    await expect(started).rejects.toThrow(`outputSchema is too large: ${limit}`)
    expect(fx.host.agents.list().map((agent) => agent.id)).toEqual([fx.parent.id])
    expect(fx.model.requests).toHaveLength(0)
  })

  it('a schema at the limits still works: the child reports through it', async () => {
    // The root plus SCHEMA_LIMITS.subschemas - 1 properties: exactly the most subschemas allowed.
    const outputSchema = { ...manyProperties(SCHEMA_LIMITS.subschemas - 1), required: ['p0'] }
    const fx = setup(transport, [toolCallResponse('s', 'structured_output', { p0: 'yes' })])
    const result = await fx.host.spawn.run({ prompt: 'x', parent: fx.parent, outputSchema })
    expect(result).toMatchObject({ stopReason: 'completed', structured: { p0: 'yes' } })
  })
})

describe('schema limits: tool parameters', () => {
  it.each(TOO_LARGE)('tool parameters with %s are refused when the tool is defined', (_, schema, limit) => {
    expect(() => defineTool({ name: 'big', description: 'b', parameters: schema(), execute: () => '' })).toThrow(`tool "big" parameters is too large: ${limit}`)
  })
})
