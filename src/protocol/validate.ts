/**
 * Compiled validators for everything that crosses a boundary. One Ajv instance; each validator is
 * compiled on first use, then reused. A shape used in many places is shared: registered once by
 * its `$id` (by the module that defines it), compiled once, and referenced from the others.
 */
import { SubagentError } from './errors.js'
import type { JSONSchema, References, Wire } from './schema.js'
import { Ajv, type ValidateFunction } from 'ajv'

// strictRequired is off: a discriminated oneOf lists its tag as required at its root by design.
// validateSchema is off: these are our own schemas (the tests compile every one); checking them against
// the meta-schema would cost every new thread ~50 ms at start.
const ajv = new Ajv({ discriminator: true, allErrors: false, strict: true, strictRequired: false, validateSchema: false })

/** Registers shapes with an `$id` so that others can `ref` them. */
export function share(...schemas: Array<{ $id: string }>): void {
  ajv.addSchema(schemas)
}

export class ProtocolError extends SubagentError<'ERR_SUBAGENT_PROTOCOL'> {
  override name = 'ProtocolError'

  constructor(message: string) {
    super('ERR_SUBAGENT_PROTOCOL', message)
  }
}

export interface Validator<T> {
  (value: unknown): value is T
  /** Throws a ProtocolError naming `what` and the first violation. */
  assert(value: unknown, what: string): asserts value is T
  /** The first violation, in words. */
  explain(value: unknown, what: string): string
}

/**
 * A lazily compiled, cached validator for a wire shape, typed from its schema as `Wire` types the
 * shape: `references` are the shared shapes it `ref`s (transitively). Ajv finds those by `$id`
 * (registered by `share`), so they are there for the type only.
 */
export function validator<S extends JSONSchema, R extends References = []>(schema: S, ..._references: R): Validator<Wire<S, R>> {
  let compiled: ValidateFunction | undefined
  const id = (schema as { $id?: unknown }).$id
  const compile = (): ValidateFunction => (compiled ??= (typeof id === 'string' && ajv.getSchema(id)) || ajv.compile(schema))
  const check = ((value: unknown) => compile()(value)) as Validator<Wire<S, R>>
  check.explain = (value, what) => {
    const validate = compile()
    return validate(value) ? 'no violation' : ajv.errorsText(validate.errors, { dataVar: what })
  }
  check.assert = (value, what) => {
    if (!compile()(value)) throw new ProtocolError(`invalid ${what}: ${check.explain(value, what)}`)
  }
  return check
}
