/**
 * One schema in, one checked JSON Schema out: what `outputSchema` and tool parameters accept,
 * whether the caller wrote a JSON Schema, a zod 4 schema (or any Standard JSON Schema) or an
 * AI SDK schema (`jsonSchema()` / `zodSchema()`). No schema library is imported: each is
 * recognised by what it carries, so this runs wherever the caller's schema came from.
 */
import { checkSchemaSubset, UnsupportedSchemaError } from './schema.js'
import { messageOf } from '../../protocol/errors.js'

/** A plain JSON Schema object. */
export type JsonSchema = Record<string, unknown>

/**
 * A JSON Schema object, a zod 4 schema (or any Standard JSON Schema that converts itself), an AI
 * SDK schema (`jsonSchema()`, `zodSchema()`) or an AI SDK `lazySchema()`. Typed `object`, like
 * `outputSchema`, because JSON Schema types are often interfaces.
 */
export type SchemaLike = object

/** A Standard JSON Schema (zod ≥ 4.2, and other vendors): it converts itself. */
interface StandardJsonSchemaLike {
  readonly '~standard': {
    readonly vendor: string
    readonly jsonSchema?: { readonly input: (options: { readonly target: 'draft-07' }) => unknown }
  }
}

/** An AI SDK schema, as `jsonSchema()` and `zodSchema()` of `ai` 5, 6 and 7 make it. */
interface AiSdkSchemaLike {
  readonly jsonSchema: unknown
}

export interface ToJsonSchemaOptions {
  /** Names the schema in error messages; default `'schema'`. */
  what?: string
  /**
   * zod's converter (`z.toJSONSchema` from `zod` or `zod/mini`), for zod schemas that cannot
   * convert themselves; when given, it is used for every zod schema.
   */
  toJSONSchema?: (schema: never, params: { target: 'draft-7'; io: 'input' }) => unknown
}

// The AI SDK marks its schemas with this global symbol (`ai` 5, 6 and 7 alike).
const AI_SDK_SCHEMA = Symbol.for('vercel.ai.schema')

/** Whether `schema` comes from a schema library (zod, the AI SDK) and must be converted; a plain JSON Schema need not. */
export function isLibrarySchema(schema: unknown): boolean {
  if (typeof schema === 'function') return true
  return typeof schema === 'object' && schema !== null && ('~standard' in schema || (schema as Record<symbol, unknown>)[AI_SDK_SCHEMA] === true)
}

/**
 * Converts `schema` to a plain JSON Schema and checks it against the supported subset (an
 * object-rooted schema; see docs/contract.md). Throws an UnsupportedSchemaError saying what to
 * pass instead when it cannot. The result is a copy: later changes to `schema` do not reach it.
 */
export function toJsonSchema(schema: SchemaLike, options: ToJsonSchemaOptions = {}): JsonSchema {
  const what = options.what ?? 'schema'
  const json = convert(schema, what, options)
  checkSchemaSubset(json, what)
  return structuredClone(json)
}

function convert(schema: unknown, what: string, options: ToJsonSchemaOptions): unknown {
  if (typeof schema === 'function') {
    // An AI SDK lazySchema(): a function returning the schema.
    const made: unknown = schema()
    if (!isAiSdkSchema(made)) throw new UnsupportedSchemaError(`${what} is a function that did not return an AI SDK schema: pass the schema itself`)
    return fromAiSdk(made, what)
  }
  if (typeof schema !== 'object' || schema === null) {
    throw new UnsupportedSchemaError(`${what} must be a JSON Schema object, a zod 4 schema or an AI SDK schema, not ${schema === null ? 'null' : typeof schema}`)
  }
  if (isAiSdkSchema(schema)) return fromAiSdk(schema, what)
  if ('~standard' in schema) return fromStandard(schema as StandardJsonSchemaLike, what, options)
  return schema
}

function isAiSdkSchema(value: unknown): value is AiSdkSchemaLike {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[AI_SDK_SCHEMA] === true && 'jsonSchema' in value
}

function fromAiSdk(schema: AiSdkSchemaLike, what: string): unknown {
  const json = attempt(() => schema.jsonSchema, what)
  if (isThenable(json)) {
    throw new UnsupportedSchemaError(`${what} is an AI SDK schema whose JSON Schema is a promise: await it and pass the JSON Schema itself`)
  }
  return json
}

function fromStandard(schema: StandardJsonSchemaLike, what: string, options: ToJsonSchemaOptions): unknown {
  const standard = schema['~standard']
  const vendor = typeof standard?.vendor === 'string' ? standard.vendor : 'unknown'
  if (vendor === 'zod' && options.toJSONSchema) {
    const convertZod = options.toJSONSchema
    return attempt(() => convertZod(schema as never, { target: 'draft-7', io: 'input' }), what)
  }
  if (typeof standard?.jsonSchema?.input === 'function') {
    const converter = standard.jsonSchema
    return attempt(() => converter.input({ target: 'draft-07' }), what)
  }
  const method = (schema as { toJSONSchema?: unknown }).toJSONSchema
  if (vendor === 'zod' && typeof method === 'function') {
    return attempt(() => method.call(schema, { target: 'draft-7', io: 'input' }), what)
  }
  if (vendor === 'zod') {
    throw new UnsupportedSchemaError(
      `${what} is a zod schema that cannot convert itself to JSON Schema (zod 3, or zod/mini): pass { toJSONSchema: z.toJSONSchema } from zod 4, or a JSON Schema`,
    )
  }
  throw new UnsupportedSchemaError(`${what} is a Standard Schema of "${vendor}" without a JSON Schema converter: pass a JSON Schema instead`)
}

function attempt(convertIt: () => unknown, what: string): unknown {
  try {
    return convertIt()
  } catch (error) {
    throw new UnsupportedSchemaError(`${what} could not be converted to JSON Schema: ${messageOf(error)}`)
  }
}

function isThenable(value: unknown): boolean {
  return typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function'
}
