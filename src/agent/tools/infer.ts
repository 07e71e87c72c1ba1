/**
 * The value type a schema describes, for the places a caller gives one: a tool's `parameters`
 * (its arguments) and a start's `outputSchema` (the child's `structured` result). Computed by the
 * type checker only: a JSON Schema literal through json-schema-to-ts, a zod 4 (Standard Schema)
 * schema's input type, an AI SDK schema's type; `Fallback` when the schema's type says nothing.
 */
import type { FromSchema, JSONSchema } from 'json-schema-to-ts'

export type Infer<S, Fallback> = object extends S
  ? Fallback // a schema typed only as `object`: nothing to read
  : S extends { readonly '~standard': { readonly types?: infer T } }
    ? NonNullable<T> extends { readonly input: infer I }
      ? I
      : Fallback
    : S extends { readonly _type: infer T }
      ? T
      : S extends JSONSchema
        ? OrFallback<FromSchema<S>, Fallback>
        : Fallback

type OrFallback<T, Fallback> = unknown extends T ? Fallback : T
