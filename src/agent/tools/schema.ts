/**
 * The JSON Schema subset that tool parameters and structured output accept. Checked up front so
 * an unsupported schema fails loudly before any tool is registered or any child exists; argument
 * validators are compiled once per schema object.
 */
import { SubagentTypeError } from '../../protocol/errors.js'
import type { ValidateFunction } from 'ajv'
import { Ajv } from '../../protocol/ajv.js'

export class UnsupportedSchemaError extends SubagentTypeError<'ERR_SUBAGENT_SCHEMA'> {
  override name = 'UnsupportedSchemaError'

  constructor(message: string) {
    super('ERR_SUBAGENT_SCHEMA', message)
  }
}

const TYPES = new Set(['object', 'array', 'string', 'number', 'integer', 'boolean', 'null'])
// `format` is an annotation, as JSON Schema 2020-12 has it by default: kept for the model to read,
// never checked (zod 4's z.email(), z.url(), an MCP server's tools carry it).
const ANNOTATIONS = new Set(['description', 'title', 'default', 'examples', '$comment', 'format'])
const NUMBER_KEYWORDS = ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf'] as const
const COUNT_KEYWORDS = ['minLength', 'maxLength', 'minItems', 'maxItems', 'minProperties', 'maxProperties'] as const
const OTHER_KEYWORDS = new Set(['type', 'properties', 'required', 'additionalProperties', 'items', 'enum', 'const', 'pattern', 'uniqueItems', 'anyOf', ...NUMBER_KEYWORDS, ...COUNT_KEYWORDS])

/**
 * Bounds on a schema, so that checking and compiling one (synchronously, inside `start()` or
 * `defineTool`) cannot block the host for long nor overflow its stack; the largest schema within
 * them is checked in tens of milliseconds. A schema beyond them is refused, naming the limit.
 */
export const SCHEMA_LIMITS = {
  /** Levels of nested objects and arrays in the schema document. */
  depth: 64,
  /** JSON values in the whole document (every object, array, string, number; enum entries too). */
  values: 10_000,
  /** Subschemas (each property, item, anyOf branch): each compiles to code of its own. */
  subschemas: 128,
} as const

/**
 * Throws an UnsupportedSchemaError unless `schema` is plain JSON within SCHEMA_LIMITS, rooted at
 * `type: 'object'`, uses only the supported keywords and compiles. `what` names the schema in the
 * message.
 */
export function checkSchemaSubset(schema: unknown, what: string): asserts schema is Record<string, unknown> {
  assertJson(schema, what, '#', new Set(), { values: 0 }, 0)
  if (!isPlainObject(schema) || schema['type'] !== 'object') {
    throw new UnsupportedSchemaError(`${what} must be a JSON Schema object with "type": "object" at its root`)
  }
  const subschemas = { count: 0 }
  checkNode(schema, what, '#', subschemas, true)
  try {
    argumentValidator(schema)
  } catch (error) {
    throw new UnsupportedSchemaError(`${what} is not a valid JSON Schema: ${(error as Error).message}`)
  }
}

function checkNode(node: unknown, what: string, at: string, subschemas: { count: number }, root = false): void {
  if (++subschemas.count > SCHEMA_LIMITS.subschemas) tooLarge(what, `more than ${SCHEMA_LIMITS.subschemas} subschemas (properties, items, anyOf branches)`)
  if (typeof node === 'boolean') return
  if (!isPlainObject(node)) throw new UnsupportedSchemaError(`${what} at ${at} must be a schema object`)
  const fail = (why: string): never => {
    throw new UnsupportedSchemaError(`${what} at ${at} ${why}; the supported subset is type, properties, required, additionalProperties, items, enum, const, anyOf, pattern, numeric and length bounds, and annotations (a format too, not checked)`)
  }
  for (const [key, value] of Object.entries(node)) {
    if (ANNOTATIONS.has(key) || (root && key === '$schema')) continue
    if (!OTHER_KEYWORDS.has(key)) fail(`uses the unsupported keyword "${key}"`)
    switch (key) {
      case 'type': {
        const types = Array.isArray(value) ? value : [value]
        if (types.length === 0 || !types.every((t) => typeof t === 'string' && TYPES.has(t))) fail(`has an invalid "type"`)
        if (new Set(types).size !== types.length) fail('has a "type" list that names a type twice')
        break
      }
      case 'properties':
        if (!isPlainObject(value)) fail('has a "properties" that is not an object')
        for (const [name, sub] of Object.entries(value as object)) checkNode(sub, what, `${at}/properties/${name}`, subschemas)
        break
      case 'required':
        if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) fail('has a "required" that is not a list of names')
        if (new Set(value as string[]).size !== (value as string[]).length) fail('has a "required" that names a property twice')
        break
      case 'additionalProperties':
      case 'items':
        checkNode(value, what, `${at}/${key}`, subschemas)
        break
      case 'anyOf':
        if (!Array.isArray(value) || value.length === 0) fail('has an empty or malformed "anyOf"')
        ;(value as unknown[]).forEach((sub, i) => checkNode(sub, what, `${at}/anyOf/${i}`, subschemas))
        break
      case 'enum':
        if (!Array.isArray(value) || value.length === 0) fail('has an empty or malformed "enum"')
        // JSON text as the key: linear, where Ajv's meta-schema check compares every pair.
        if (new Set((value as unknown[]).map((item) => JSON.stringify(item))).size !== (value as unknown[]).length) fail('has an "enum" that lists a value twice')
        break
      case 'pattern':
        if (typeof value !== 'string') fail('has a non-string "pattern"')
        try {
          new RegExp(value as string, 'u')
        } catch {
          fail('has a "pattern" that is not a valid regular expression')
        }
        break
      case 'uniqueItems':
        if (typeof value !== 'boolean') fail('has a non-boolean "uniqueItems"')
        break
      case 'multipleOf':
        if (typeof value !== 'number' || value <= 0) fail('has a "multipleOf" that is not a number above 0')
        break
      default:
        if ((NUMBER_KEYWORDS as readonly string[]).includes(key) && typeof value !== 'number') fail(`has a non-numeric "${key}"`)
        if ((COUNT_KEYWORDS as readonly string[]).includes(key) && !(Number.isInteger(value) && (value as number) >= 0)) fail(`has a "${key}" that is not a non-negative integer`)
    }
  }
}

function assertJson(value: unknown, what: string, at: string, seen: Set<object>, budget: { values: number }, depth: number): void {
  if (++budget.values > SCHEMA_LIMITS.values) tooLarge(what, `more than ${SCHEMA_LIMITS.values} values`)
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return
    case 'number':
      if (!Number.isFinite(value)) throw new UnsupportedSchemaError(`${what} is not JSON: ${at} is ${value}`)
      return
    case 'object':
      if (value === null) return
      if (seen.has(value)) throw new UnsupportedSchemaError(`${what} is not JSON: ${at} is a circular reference`)
      if (!Array.isArray(value) && !isPlainObject(value)) throw new UnsupportedSchemaError(`${what} is not JSON: ${at} is a ${value.constructor?.name ?? 'non-plain object'}`)
      if (depth >= SCHEMA_LIMITS.depth) tooLarge(what, `more than ${SCHEMA_LIMITS.depth} levels of nesting (at ${at.slice(0, 120)}…)`)
      seen.add(value)
      for (const [key, sub] of Object.entries(value)) assertJson(sub, what, `${at}/${key}`, seen, budget, depth + 1)
      seen.delete(value)
      return
    default:
      throw new UnsupportedSchemaError(`${what} is not JSON: ${at} is ${typeof value}`)
  }
}

function tooLarge(what: string, why: string): never {
  throw new UnsupportedSchemaError(`${what} is too large: ${why}. Schemas are bounded so that checking one cannot stall the host; split it, or describe the rest in words`)
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

// validateSchema is off: checkNode above checks the subset against the meta-schema's rules
// itself, since Ajv's check is quadratic in an enum's length (its uniqueItems): 250 ms for
// 10,000 entries. Long enums and required lists compile to a loop instead of one test each.
const ajv = new Ajv({ allErrors: false, strict: false, validateSchema: false, validateFormats: false, loopEnum: 32, loopRequired: 32 })
const byObject = new WeakMap<object, ValidateFunction>()
/** Schemas cloned across threads are new objects each time, so equal text shares one validator. */
const byText = new Map<string, ValidateFunction>()
const TEXT_CACHE_LIMIT = 256

/** A validator for arguments matching `schema`, compiled once per schema. */
export function argumentValidator(schema: object): ValidateFunction {
  let validate = byObject.get(schema)
  if (validate) return validate
  const text = JSON.stringify(schema)
  validate = byText.get(text)
  if (!validate) {
    // Ajv here speaks draft-07; the subset means the same in every draft, so the tag is dropped.
    const { $schema: _draft, ...body } = schema as Record<string, unknown>
    validate = ajv.compile(body)
    // Ajv keeps every compiled schema in a strong cache of its own; ours is the one that counts.
    ajv.removeSchema(body)
    if (byText.size >= TEXT_CACHE_LIMIT) byText.delete(byText.keys().next().value!)
    byText.set(text, validate)
  }
  byObject.set(schema, validate)
  return validate
}

/** Every violation in Ajv's own words, as an MCP client is told of invalid arguments; an unknown property named, which Ajv's words leave out. */
export function argumentErrorsText(validate: ValidateFunction): string {
  const errors = validate.errors?.map((error) =>
    error.keyword === 'additionalProperties' ? { ...error, message: `must NOT have the unknown property "${String(error.params['additionalProperty'])}"` } : error,
  )
  return ajv.errorsText(errors, { dataVar: 'arguments' })
}

/** The first violation, naming the field and the rule: `unknown property "x"`, `missing property "prompt"`, `arguments.n must be integer`. */
export function describeErrors(validate: ValidateFunction): string {
  const error = validate.errors?.[0]
  if (!error) return 'they do not match the tool\'s parameters'
  const at = `arguments${error.instancePath.replaceAll('/', '.')}`
  const where = error.instancePath ? ` in ${at}` : ''
  switch (error.keyword) {
    case 'additionalProperties':
      return `unknown property "${String(error.params['additionalProperty'])}"${where}`
    case 'required':
      return `missing property "${String(error.params['missingProperty'])}"${where}`
    default:
      return `${at} ${error.message ?? 'is invalid'}`
  }
}
