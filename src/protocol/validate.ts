/**
 * Compiled validators for everything that crosses a boundary. The build compiles each to code
 * (scripts/precompile-validators.mjs writes `precompiled.cjs` beside this module's build output),
 * so a new thread or process only loads them: compiling them here cost every runner about 100 ms
 * of CPU at its first frame. A validator the build did not compile (its schema changed since, or
 * the build step did not run) is compiled here on first use by the one Ajv instance, then reused.
 * A shape used in many places is shared: registered once by its `$id` (by the module that defines
 * it), compiled once, and referenced from the others.
 */
import { createRequire } from 'node:module'
import { SubagentError } from './errors.js'
import type { JSONSchema, References, Wire } from './schema.js'
import type { Options, ValidateFunction } from 'ajv'
import { Ajv } from './ajv.js'

// strictRequired is off: a discriminated oneOf lists its tag as required at its root by design.
// validateSchema is off: these are our own schemas (the tests compile every one); checking them against
// the meta-schema would cost every new thread ~50 ms at start.
export const AJV_OPTIONS: Options = { discriminator: true, allErrors: false, strict: true, strictRequired: false, validateSchema: false }
const ajv = new Ajv(AJV_OPTIONS)

/** The shared shapes by `$id`, and every validator's schema: what the build compiles. */
const shared = new Map<string, object>()
const schemas: object[] = []

/** Registers shapes with an `$id` so that others can `ref` them. */
export function share(...shapes: Array<{ $id: string }>): void {
  for (const shape of shapes) shared.set(shape.$id, shape)
  ajv.addSchema(shapes)
}

/** For the build: the shared shapes and the schema of every validator made so far. */
export function registered(): { shared: readonly object[]; schemas: readonly object[] } {
  return { shared: [...shared.values()], schemas: [...schemas] }
}

/**
 * What a compiled validator checks, as text: its schema and every shared shape it reaches by
 * `$ref`, so a change to any of them changes the key and a stale build's code is never used.
 */
export function schemaKey(schema: object): string {
  const parts = [JSON.stringify(schema)]
  const reached = new Set<string>()
  for (let i = 0; i < parts.length; i++) {
    for (const [, id] of parts[i]!.matchAll(/"\$ref":"([^"]+)"/g)) {
      const shape = shared.get(id!)
      if (reached.has(id!) || !shape) continue
      reached.add(id!)
      parts.push(JSON.stringify(shape))
    }
  }
  return parts.join('\n')
}

type Precompiled = ReadonlyMap<string, ValidateFunction>
let precompiled: Precompiled | undefined

function loadPrecompiled(): Precompiled {
  try {
    // From dist/protocol/ and from the runner's bundle, dist/runner/, alike (scripts/bundle-runner.mjs).
    return (createRequire(import.meta.url)('../protocol/precompiled.cjs') as { bySchema: Precompiled }).bySchema
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND') return new Map()
    throw error
  }
}

/** The build's code for `schema`, if the build compiled this very schema (and the shapes it reaches). */
export function built(schema: object): ValidateFunction | undefined {
  return (precompiled ??= loadPrecompiled()).get(schemaKey(schema))
}

function compile(schema: object): ValidateFunction {
  const id = (schema as { $id?: unknown }).$id
  return built(schema) ?? ((typeof id === 'string' && ajv.getSchema(id)) || ajv.compile(schema))
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
 * A cached validator for a wire shape, typed from its schema as `Wire` types the shape:
 * `references` are the shared shapes it `ref`s (transitively). Ajv finds those by `$id`
 * (registered by `share`), so they are there for the type only.
 */
export function validator<S extends JSONSchema, R extends References = []>(schema: S, ..._references: R): Validator<Wire<S, R>> {
  schemas.push(schema as object)
  let compiled: ValidateFunction | undefined
  const validate = (): ValidateFunction => (compiled ??= compile(schema as object))
  const check = ((value: unknown) => validate()(value)) as Validator<Wire<S, R>>
  check.explain = (value, what) => {
    const run = validate()
    return run(value) ? 'no violation' : ajv.errorsText(run.errors, { dataVar: what })
  }
  check.assert = (value, what) => {
    if (!validate()(value)) throw new ProtocolError(`invalid ${what}: ${check.explain(value, what)}`)
  }
  return check
}
