/** Builders for the protocol's JSON Schemas: closed objects, and unions of them discriminated by `type`. */

/** An object with exactly these properties, each required unless listed as optional. */
export function closed(properties: Record<string, object>, optional: readonly string[] = []): object {
  return {
    type: 'object',
    properties,
    required: Object.keys(properties).filter((key) => !optional.includes(key)),
    additionalProperties: false,
  }
}

/** One variant of a union: `type` fixed, otherwise as `closed`. */
export function variant(type: string, properties: Record<string, object> = {}, optional: readonly string[] = []): object {
  return closed({ type: { const: type }, ...properties }, optional)
}

/** A union of variants, dispatched on `type` (Ajv's discriminator: one branch checked, not all). */
export function union($id: string, variants: readonly object[]): object {
  return { $id, type: 'object', discriminator: { propertyName: 'type' }, required: ['type'], oneOf: variants }
}
