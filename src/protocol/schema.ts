/**
 * Builders for the protocol's schemas. Each wire shape is written once, as a plain JSON Schema
 * literal: its TypeScript type is derived from it at compile time (json-schema-to-ts, nothing at
 * run time), and Ajv compiles its validator. Shapes used in many places have an `$id`, are
 * compiled once, and are referenced with `ref`.
 */
import type { FromSchema, FromSchemaOptions, JSONSchema } from 'json-schema-to-ts'

export type { JSONSchema }

/** The shared shapes (schemas with an `$id`) that a schema `ref`s, by their schema types. */
export type References = Exclude<FromSchemaOptions['references'], false | undefined>

/** The TypeScript type of a wire shape; `Refs` lists the shared shapes it `ref`s. */
export type Wire<S extends JSONSchema, Refs extends References = []> = FromSchema<S, { references: Refs }>

type Properties = Record<string, JSONSchema>
type Keys<P> = readonly (keyof P & string)[]

/** An object with exactly these properties; those named in `optional` may be absent. */
export function closed<const P extends Properties, const O extends Keys<P> = []>(properties: P, optional?: O) {
  const required = Object.keys(properties).filter((key) => !optional?.includes(key)) as Exclude<keyof P & string, O[number]>[]
  return { type: 'object', properties, required, additionalProperties: false } as const
}

/** One variant of a union: `type` fixed, otherwise as `closed` (give `{}` for none: an omitted argument would type as any properties). */
export function variant<const T extends string, const P extends Properties, const O extends Keys<P> = []>(type: T, properties: P, optional?: O) {
  return closed({ type: { const: type }, ...properties } as { type: { const: T } } & P, optional)
}

/**
 * A union of closed objects dispatched on one property: Ajv's discriminator checks the one
 * matching branch, not every branch, and names the tag when none matches.
 */
export function union<const V extends readonly JSONSchema[], const Tag extends string = 'type'>(variants: V, tag?: Tag) {
  const propertyName = tag ?? 'type'
  return { type: 'object', discriminator: { propertyName }, required: [propertyName], oneOf: variants } as {
    type: 'object'
    discriminator: { propertyName: Tag }
    required: [Tag]
    oneOf: V
  }
}

/** A reference to a shared shape by its `$id`. */
export function ref<const Id extends string>(id: Id) {
  return { $ref: id } as const
}

export const string = { type: 'string' } as const
export const boolean = { type: 'boolean' } as const
export const number = { type: 'number' } as const
/** Non-negative integers: sequence numbers, depths, counts. */
export const count = { type: 'integer', minimum: 0 } as const
/** Any value at all (checked, if at all, where it is used). */
export const anything = {} as const
/** Any JSON object: a JSON Schema, tool arguments. */
export const object = { type: 'object' } as const
export const arrayOf = <const S extends JSONSchema>(items: S) => ({ type: 'array', items }) as const
