/** toJsonSchema: JSON Schema, zod 4 and AI SDK schemas (of `ai` 5, 6 and 7) to one checked JSON Schema. */
import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import * as zm from 'zod/mini'
import { jsonSchema, zodSchema } from 'ai'
import { jsonSchema as jsonSchema5, zodSchema as zodSchema5 } from 'ai5'
import { jsonSchema as jsonSchema7, zodSchema as zodSchema7 } from 'ai7'
import { toJsonSchema, UnsupportedSchemaError } from 'subagent-worker'
import { argumentValidator } from '../../dist/agent/tools/schema.js'

const CITY = { type: 'object', properties: { city: { type: 'string' }, population: { type: 'integer', minimum: 0 } }, required: ['city'] }
const ZOD_CITY = z.object({ city: z.string(), population: z.number().int().min(0).optional() })
const FROM_ZOD = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  type: 'object',
  properties: { city: { type: 'string' }, population: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER } },
  required: ['city'],
}

describe('toJsonSchema', () => {
  it('passes a JSON Schema of the subset through, as a copy', () => {
    const schema = structuredClone(CITY)
    const converted = toJsonSchema(schema)
    schema.required.push('population')
    expect(converted).toEqual(CITY)
  })

  it('converts a zod 4 schema (draft-07, the input side) without importing zod', () => {
    expect(toJsonSchema(ZOD_CITY)).toEqual(FROM_ZOD)
  })

  it.each([
    ['ai 6 jsonSchema()', jsonSchema(CITY as Parameters<typeof jsonSchema>[0]), CITY],
    ['ai 5 jsonSchema()', jsonSchema5(CITY as Parameters<typeof jsonSchema5>[0]), CITY],
    ['ai 7 jsonSchema()', jsonSchema7(CITY as Parameters<typeof jsonSchema7>[0]), CITY],
    ['ai 6 zodSchema()', zodSchema(ZOD_CITY), { ...FROM_ZOD, additionalProperties: false }],
    ['ai 5 zodSchema()', zodSchema5(ZOD_CITY), { ...FROM_ZOD, additionalProperties: false }],
    ['ai 7 zodSchema()', zodSchema7(ZOD_CITY), { ...FROM_ZOD, additionalProperties: false }],
    ['a lazy AI SDK schema', () => jsonSchema(CITY as Parameters<typeof jsonSchema>[0]), CITY],
  ])('converts %s', (_, schema, expected) => {
    expect(toJsonSchema(schema)).toEqual(expected)
  })

  it('a zod/mini schema needs the converter passed in, and says so', () => {
    const mini = zm.object({ city: zm.string() })
    expect(() => toJsonSchema(mini, { what: 'outputSchema' })).toThrow(
      'outputSchema is a zod schema that cannot convert itself to JSON Schema (zod 3, or zod/mini): pass { toJSONSchema: z.toJSONSchema } from zod 4, or a JSON Schema',
    )
    expect(toJsonSchema(mini, { toJSONSchema: zm.toJSONSchema })).toMatchObject({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'] })
  })

  it("keeps a format as an annotation, for the model to read, and never checks it (zod 4's z.url(), z.email())", () => {
    const schema = toJsonSchema(z.object({ site: z.url(), mail: z.email() }), { what: 'outputSchema' })
    expect(schema).toMatchObject({ properties: { site: { type: 'string', format: 'uri' }, mail: { type: 'string', format: 'email' } } })
    const validate = argumentValidator(schema)
    expect(validate({ site: 'not a url', mail: 'a@example.com' })).toBe(true)
    // What zod expresses as a pattern is checked as one.
    expect(validate({ site: 'https://example.com', mail: 'not an email' })).toBe(false)
  })

  it.each([
    ['a zod type JSON Schema cannot represent', z.object({ when: z.date() }), 'outputSchema could not be converted to JSON Schema: Date cannot be represented in JSON Schema'],
    ['a schema not rooted at an object', z.string(), 'outputSchema must be a JSON Schema object with "type": "object" at its root'],
    ['a keyword outside the subset', z.object({ scores: z.record(z.string(), z.number()) }), 'outputSchema at #/properties/scores uses the unsupported keyword "propertyNames"'],
    ['an AI SDK schema whose JSON Schema is a promise', jsonSchema(Promise.resolve(CITY as Parameters<typeof jsonSchema>[0])), 'outputSchema is an AI SDK schema whose JSON Schema is a promise: await it and pass the JSON Schema itself'],
    ['a Standard Schema that cannot convert itself', { '~standard': { vendor: 'other', version: 1, validate: (value: unknown) => ({ value }) } }, 'outputSchema is a Standard Schema of "other" without a JSON Schema converter: pass a JSON Schema instead'],
  ])('refuses %s with an UnsupportedSchemaError saying why', (_, schema, message) => {
    const convert = () => toJsonSchema(schema, { what: 'outputSchema' })
    expect(convert).toThrow(UnsupportedSchemaError)
    expect(convert).toThrow(message)
  })
})
