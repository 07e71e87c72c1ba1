/** Builders for the protocol's JSON Schemas: unions discriminated by `type`, of closed variants. */

/** One variant: `type` fixed, every property required unless listed as optional, nothing else allowed. */
export function variant(type: string, properties: Record<string, object> = {}, optional: readonly string[] = []): object {
  return {
    type: 'object',
    properties: { type: { const: type }, ...properties },
    required: ['type', ...Object.keys(properties).filter((key) => !optional.includes(key))],
    additionalProperties: false,
  }
}

/** A union of variants, dispatched on `type` (Ajv's discriminator: one branch checked, not all). */
export function union($id: string, variants: readonly object[]): object {
  return { $id, type: 'object', discriminator: { propertyName: 'type' }, required: ['type'], oneOf: variants }
}
