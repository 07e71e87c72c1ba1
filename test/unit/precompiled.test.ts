/**
 * The protocol's validators are compiled by the build (scripts/precompile-validators.mjs), not by
 * each thread at its first frame: every one the library makes is found there, a schema that
 * changed since is not, and the build's code says what Ajv compiling the schema here would say.
 */
import { describe, expect, it } from 'vitest'
import { Ajv } from 'ajv'
import '../../dist/index.js'
import '../../dist/bullmq/index.js'
import '../../dist/remote/node.js'
import '../../dist/worker/runner.js'
import { AJV_OPTIONS, built, registered, schemaKey, validator } from '../../dist/protocol/validate.js'
import { PROTOCOL_VERSION } from '../../dist/protocol/messages.js'
import { ContentBlock } from '../../dist/protocol/shapes/content.js'

const header = { id: 'c1', createdAt: new Date(0).toISOString() }
const spec = { id: 'c1', header, options: {}, seed: [], descriptor: { mode: 'one-shot', provider: 'spawn' } }
const messages: unknown[] = [
  { type: 'welcome', v: PROTOCOL_VERSION, config: { maxParallelToolCalls: 8 } },
  { type: 'create', child: 'c1', spec, hostModels: [], hostTools: [] },
  { type: 'create', child: 'c1', spec: { ...spec, extra: 1 }, hostModels: [], hostTools: [] },
  { type: 'publish', child: 'c1', prompt: [{ type: 'text', text: 'hi' }] },
  { type: 'publish', child: 'c1', prompt: 'not blocks' },
  { type: 'abort', child: 'c1', reason: { kind: 'parent' } },
  { type: 'rpc/chunks', child: 'c1', call: 1, chunks: [{ type: 'text-delta', text: 'a' }] },
  { type: 'rpc/chunks', child: 'c1', call: 1, chunks: [{ type: 'text-delta' }] },
  { type: 'rpc/chunks', child: 'c1', call: 1, chunks: ['a', { type: 'finish', reason: 'stop' }] },
  { type: 'rpc/result', child: 'c1', call: 1, chunks: ['a', 7] },
  { type: 'events', child: 'c1', events: ['a', { seq: 3, type: 'turn/start', data: {} }] },
  { type: 'idle', child: 'c1', events: [null] },
  { type: 'texts', texts: ['c1', 'a', 'c2', 'b'] },
  { type: 'texts', texts: ['c1', 7] },
  { type: 'texts', texts: [] },
  { type: 'hello', v: PROTOCOL_VERSION },
  { type: 'ready', hooks: ['beforeStep', 'afterTool'] },
  { type: 'ready', hooks: ['afterTool', 'afterTool'] },
  { type: 'events', child: 'c1', events: [{ seq: 0, type: 'turn/start', data: {} }] },
  { type: 'events', child: 'c1', events: [{ seq: 0, type: 'turn/start', data: { extra: 1 } }] },
  { type: 'idle', child: 'c1', structured: { value: { a: 1 } } },
  { type: 'rpc/call', child: 'c1', call: 1, method: 'tool', payload: { name: 'x', callId: 'k', args: {} } },
  { type: 'rpc/call', child: 'c1', call: 0, method: 'shell', payload: {} },
  { type: 'take', job: 'j1', token: 't' },
  { type: 'room', level: 1, free: 2, placed: 0 },
  { type: 'launch-missiles' },
  { type: 'text', text: 'hi' },
  { type: 'text-delta', text: 'a' },
  { name: 'x', callId: 'k', args: {} },
  { seq: 1, type: 'assistant/message', data: { content: [{ type: 'text', text: 'ok' }] } },
  null,
  'text',
  [],
]
const values = [...messages, ...messages.map((message) => [message]), messages]
/** What the library made, before a test makes one of its own. */
const library = registered()

describe('precompiled validators', () => {
  it('every validator the library makes was compiled by the build', () => {
    const { schemas } = library
    expect(schemas.length).toBeGreaterThan(10)
    expect(schemas.filter((schema) => !built(schema as object))).toEqual([])
  })

  it("the build's code gives the verdict and the words Ajv gives compiling the schema here", () => {
    const { shared, schemas } = library
    const here = new Ajv(AJV_OPTIONS)
    here.addSchema([...shared])
    for (const schema of schemas) {
      const id = (schema as { $id?: string }).$id
      const compiled = (id && here.getSchema(id)) || here.compile(schema)
      const code = built(schema as object)!
      for (const value of values) {
        const verdict = compiled(value)
        expect(code(value)).toBe(verdict)
        if (!verdict) expect(here.errorsText(code.errors)).toBe(here.errorsText(compiled.errors))
      }
    }
  })

  it('a schema changed since the build, or one reaching a changed shared shape, finds no code and is compiled at first use', () => {
    const changed = { ...ContentBlock, description: 'changed' }
    expect(built(ContentBlock)).toBeDefined()
    expect(built(changed)).toBeUndefined()
    const reaching = { type: 'array', items: { $ref: ContentBlock.$id } }
    expect(schemaKey(reaching)).toContain(JSON.stringify(ContentBlock))
    const short = validator({ type: 'string', maxLength: 2 } as const)
    expect(short('ab')).toBe(true)
    expect(short.explain('abc', 'name')).toBe('name must NOT have more than 2 characters')
  })
})
