/**
 * An MCP server's `inputSchema` in the subset a host tool's parameters accept. Servers write
 * their schemas with generators (pydantic, zod), which reach for constructs the subset has not:
 * a local `$ref` into `$defs` (or to a schema used twice), `oneOf` for a discriminated union (with
 * OpenAPI's `discriminator` beside it, from pydantic), and `allOf` around a single `$ref`. Each is
 * rewritten here into the same schema in the subset: a reference is inlined, a one-entry `allOf`
 * merged into its parent, `discriminator` dropped and `oneOf` checked as `anyOf`, which is looser
 * only where two branches both match; the server checks its own arguments again, so nothing it
 * would refuse gets through it. Anything else is left to the subset's check, which names the
 * keyword.
 */
import { SCHEMA_LIMITS, UnsupportedSchemaError } from '../agent/tools/schema.js'

type Json = unknown

interface Expansion {
  readonly root: Json
  readonly tool: string
  /** References being inlined, outermost first: one met again inside itself is recursive. */
  readonly open: string[]
  /** JSON values written so far: inlining multiplies them, and the subset's bound is on the result. */
  values: number
}

/** `schema` with its local references inlined, `$defs` gone, one-entry `allOf` merged and `oneOf` as `anyOf`. */
export function subsetSchema(schema: Json, tool: string): Json {
  if (!isObject(schema)) return schema
  const { $defs: _defs, definitions: _definitions, ...body } = schema
  return rewrite(body, { root: schema, tool, open: [], values: 0 })
}

function rewrite(node: Json, at: Expansion): Json {
  if (++at.values > SCHEMA_LIMITS.values) throw new UnsupportedSchemaError(`MCP tool "${at.tool}"'s inputSchema is too large once its references are inlined: more than ${SCHEMA_LIMITS.values} values`)
  if (Array.isArray(node)) return node.map((item) => rewrite(item, at))
  if (!isObject(node)) return node
  if (typeof node['$ref'] === 'string') return inlined(node, node['$ref'], at)
  const out: Record<string, Json> = {}
  for (const [key, value] of Object.entries(node)) {
    // OpenAPI's discriminator (pydantic writes it beside a oneOf): a hint the server's own check uses, no JSON Schema keyword.
    if (key === 'discriminator') continue
    if (key === 'oneOf' && !Object.hasOwn(node, 'anyOf')) out['anyOf'] = rewrite(value, at)
    else if (key === 'properties' && isObject(value)) out[key] = Object.fromEntries(Object.entries(value).map(([name, sub]) => [name, rewrite(sub, at)]))
    else if (key === 'enum' || key === 'const' || key === 'default' || key === 'examples') out[key] = value
    else out[key] = rewrite(value, at)
  }
  const allOf = out['allOf']
  if (Array.isArray(allOf) && allOf.length === 1 && isObject(allOf[0]) && !sharesKeys(allOf[0], out)) {
    const { allOf: _allOf, ...rest } = out
    return { ...allOf[0], ...rest }
  }
  return out
}

/** The schema `ref` points to, rewritten, with the referring object's other keys (annotations, most often) beside it. */
function inlined(node: Record<string, Json>, ref: string, at: Expansion): Json {
  if (at.open.includes(ref)) throw new UnsupportedSchemaError(`MCP tool "${at.tool}"'s inputSchema is recursive (${ref} refers to itself), which a tool's parameters cannot be`)
  const target = resolve(at.root, ref)
  if (target === undefined) throw new UnsupportedSchemaError(`MCP tool "${at.tool}"'s inputSchema has a $ref "${ref}" that is not a schema in the same document`)
  at.open.push(ref)
  const schema = rewrite(target, at)
  at.open.pop()
  const { $ref: _ref, ...beside } = node
  if (Object.keys(beside).length === 0) return schema
  const rest = rewrite(beside, at) as Record<string, Json>
  if (!isObject(schema) || sharesKeys(schema, rest)) return { ...rest, allOf: [schema] }
  return { ...schema, ...rest }
}

/** A JSON Pointer into the same document (`#`, `#/$defs/Point`, `#/properties/from`), else undefined. */
function resolve(root: Json, ref: string): Json | undefined {
  if (ref === '#') return root
  if (!ref.startsWith('#/')) return undefined
  let node = root
  for (const part of ref.slice(2).split('/')) {
    const key = decodeURIComponent(part).replaceAll('~1', '/').replaceAll('~0', '~')
    if (!isObject(node) || !Object.hasOwn(node, key)) return undefined
    node = node[key]
  }
  return node
}

function sharesKeys(a: Record<string, Json>, b: Record<string, Json>): boolean {
  return Object.keys(a).some((key) => Object.hasOwn(b, key))
}

function isObject(value: Json): value is Record<string, Json> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
