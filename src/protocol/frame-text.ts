/**
 * A runner's frames as JSON text, where that is exact. The host decodes every frame a runner
 * sends, and V8's structured-clone deserializer builds objects at about twice JSON.parse's cost:
 * it was the largest single part of the host's share of a delegation (BENCHMARKS.md, "The host's
 * share, by instruction count"). JSON carries less than a structured clone, so a frame crosses
 * as text only when every value in it comes back the same: strings, finite numbers other than
 * -0, booleans and null, in plain objects and dense arrays, not nested too deep. Anything else (a
 * tool's Date or Map, an undefined, a cycle) crosses as a structured clone, as before, and the
 * host reads either (intake.ts).
 */
import { RUNNER_BOUNDS } from './bounds.js'

/** Deeper than this, a frame crosses as a structured clone: the check stays bounded, cycles included. */
const MAX_DEPTH = 64

/** The frame as JSON text when that is exact and within the host's frame bound, else the frame itself. */
export function encodeFrame(frame: readonly unknown[]): string | readonly unknown[] {
  if (!jsonExact(frame, 0)) return frame
  const text = JSON.stringify(frame)
  return text.length <= RUNNER_BOUNDS.frameBytes ? text : frame
}

/** Whether JSON.parse(JSON.stringify(value)) is what a structured clone of it would be. */
function jsonExact(value: unknown, depth: number): boolean {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return true
    case 'number':
      return Number.isFinite(value) && !Object.is(value, -0)
    case 'object':
      break
    default:
      return false
  }
  if (value === null) return true
  if (depth >= MAX_DEPTH) return false
  if (Array.isArray(value)) {
    // A hole reads as undefined (not exact); named properties on an array would be lost.
    for (let i = 0; i < value.length; i++) if (!jsonExact(value[i], depth + 1)) return false
    return Object.keys(value).length === value.length
  }
  const prototype = Object.getPrototypeOf(value)
  if (prototype !== Object.prototype && prototype !== null) return false
  for (const key in value) if (!jsonExact((value as Record<string, unknown>)[key], depth + 1)) return false
  return true
}

/** A frame that crossed as JSON text, read back; text that is not JSON is handed on as it is, for the channel to name. */
export function decodeFrame(text: string): unknown {
  try {
    return JSON.parse(text) as unknown
  } catch {
    return text
  }
}
