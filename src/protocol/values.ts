/**
 * Values that cross a boundary: plain data only, and never nested deeper than MAX_VALUE_DEPTH, so
 * that a value the sending side could encode is one the receiving side (whose stack may be
 * smaller) can decode. A value that fails either test is refused before it enters a frame.
 */

/** Levels of arrays and objects a tool value, tool arguments or a cancel reason may have. */
export const MAX_VALUE_DEPTH = 1000

/** True when the value nests arrays and objects at most `limit` levels deep. */
export function withinDepth(value: unknown, limit = MAX_VALUE_DEPTH): boolean {
  return depthBelow(value, limit)
}

function depthBelow(value: unknown, remaining: number): boolean {
  if (typeof value !== 'object' || value === null) return true
  if (remaining === 0) return false
  if (Array.isArray(value)) {
    for (const item of value) if (!depthBelow(item, remaining - 1)) return false
    return true
  }
  // Maps and Sets clone too: their entries count as one level deeper.
  const entries = value instanceof Map ? [...value.keys(), ...value.values()] : value instanceof Set ? [...value] : Object.values(value)
  for (const item of entries) if (!depthBelow(item, remaining - 1)) return false
  return true
}

/** A structured clone of the value, or undefined when it cannot cross a boundary (too deep, or not cloneable). */
export function tryClone(value: unknown): { value: unknown } | undefined {
  if (!withinDepth(value)) return undefined
  try {
    return { value: structuredClone(value) }
  } catch {
    return undefined
  }
}

/** A cancel reason that survives the crossing; one that cannot cross is described instead. */
export function cloneableReason(reason: unknown): unknown {
  // Whether it cloned, not what it cloned to: a reason of null or undefined crosses as itself.
  const cloned = tryClone(reason)
  return cloned ? cloned.value : described(reason)
}

/**
 * What a runner is sent to record of a cancel reason: the value itself when it can cross, else
 * the description `cloneableReason` sends. The host's own record keeps the caller's value.
 */
export function recordableReason(reason: unknown): unknown {
  return tryClone(reason) ? reason : described(reason)
}

function described(reason: unknown): { kind: 'uncloneable'; description: string } {
  return { kind: 'uncloneable', description: describeValue(reason) }
}

/** JSON where possible, never throwing (cycles, BigInt, depth, a value with no string form at all). */
export function describeValue(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    try {
      return String(value)
    } catch {
      // A null-prototype object, a revoked proxy: no text of its own.
      return `an unprintable ${typeof value}`
    }
  }
}

/**
 * Names a bad message or chunk by its `type` alone: its payload may hold tool inputs or
 * credentials, and this text can end up in a diagnostic.
 */
export function describeShape(value: unknown): string {
  const type = (value as { type?: unknown } | null)?.type
  return typeof type === 'string' ? `of type ${JSON.stringify(type.slice(0, 40))}` : `(${value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value})`
}
