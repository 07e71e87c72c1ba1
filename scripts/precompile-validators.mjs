// Build step, after tsc: compiles every protocol validator to code (Ajv's standalone output), so
// that a thread or process loads them instead of compiling them at its first frame. Writes
// dist/protocol/precompiled.cjs: the validators, each found by its schema's key (validate.ts).
// CommonJS, because Ajv's standalone code requires its runtime helpers.
import { writeFileSync } from 'node:fs'
import { Ajv } from 'ajv'
import standalone from 'ajv/dist/standalone/index.js'

const dist = new URL('../dist/protocol/', import.meta.url)
const { AJV_OPTIONS, registered, schemaKey } = await import(new URL('validate.js', dist).href)
// The modules that make the protocol's validators (test/unit/precompiled.test.ts checks that none is left out).
await import(new URL('validators.js', dist).href)
await import(new URL('rpc.js', dist).href)

const { shared, schemas } = registered()
const ajv = new Ajv({ ...AJV_OPTIONS, code: { source: true } })
ajv.addSchema([...shared])
const exports = {}
const keys = new Map()
for (const schema of schemas) {
  const key = schemaKey(schema)
  if (keys.has(key)) continue
  const name = `v${keys.size}`
  keys.set(key, name)
  // Standalone code exports schemas by id: one without its own is given one, which changes nothing it checks.
  const id = schema.$id ?? `urn:subagent-worker:validator:${name}`
  if (!shared.includes(schema)) ajv.addSchema({ ...schema, $id: id })
  exports[name] = id
}
const code = standalone(ajv, exports)
const table = [...keys].map(([key, name]) => `[${JSON.stringify(key)}, exports.${name}]`).join(',\n')
writeFileSync(new URL('precompiled.cjs', dist), `${code}\nexports.bySchema = new Map([\n${table}\n]);\n`)
