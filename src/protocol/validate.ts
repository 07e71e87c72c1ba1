/**
 * Compiled validators for everything that crosses a boundary. One Ajv instance; each schema is
 * compiled once, on first use, and reused for every message after that.
 */
import { Ajv, type ValidateFunction } from 'ajv'
import { contentBlockSchema } from './content.js'
import { childMessageSchema, createRequestSchema, hostMessageSchema } from './lifecycle.js'
import { anySessionEventSchema, sessionEventSchema, sessionHeaderSchema } from './session.js'
import { streamChunkSchema } from './stream.js'

// strictRequired is off: a discriminated oneOf lists "type" as required at its root by design.
const ajv = new Ajv({ discriminator: true, allErrors: false, strict: true, strictRequired: false })
ajv.addSchema([
  contentBlockSchema,
  sessionHeaderSchema,
  sessionEventSchema,
  anySessionEventSchema,
  streamChunkSchema,
  createRequestSchema,
  hostMessageSchema,
  childMessageSchema,
])

export class ProtocolError extends Error {
  override name = 'ProtocolError'
  readonly code = 'ERR_SUBAGENT_PROTOCOL'
}

export interface Validator<T> {
  (value: unknown): value is T
  /** Throws a ProtocolError naming `what` and the first violation. */
  assert(value: unknown, what: string): asserts value is T
}

/** Wraps a schema (registered or not) in a lazily compiled, cached validator. */
export function validator<T>(schema: object | string): Validator<T> {
  let compiled: ValidateFunction | undefined
  const compile = (): ValidateFunction =>
    (compiled ??= typeof schema === 'string' ? ajv.getSchema(schema)! : ajv.compile(schema))
  const check = ((value: unknown) => compile()(value)) as Validator<T>
  check.assert = (value, what) => {
    const validate = compile()
    if (!validate(value)) throw new ProtocolError(`invalid ${what}: ${ajv.errorsText(validate.errors, { dataVar: what })}`)
  }
  return check
}
