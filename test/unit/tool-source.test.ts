/**
 * The tools a child sees (toolSourceOf in src/agent/tools/tools.ts, for an inline child and a
 * runner's child alike; src/worker/flushing.ts): on a runner the module's, shared by every child
 * on the runner, and, for a child that sees host tools, its own stand-ins listed first. The order
 * and the winner of a name are the host's: host tools first, a module tool taking a host tool's
 * name keeps that place, and a name listed twice resolves to its later tool.
 */
import { describe, expect, it } from 'vitest'
import { toolSourceOf } from '../../dist/agent/tools/tools.js'
import { flushing } from '../../dist/worker/flushing.js'

const tool = (name: string, description = `${name} does it`) => ({ name, description, parameters: { type: 'object', properties: {} }, execute: async () => description })
const names = (tools: Iterable<{ name: string; description: string }>) => [...tools].map(({ name, description }) => `${name}: ${description}`)
const run = async <T>(code: () => T): Promise<Awaited<T>> => await code()

describe('toolSourceOf', () => {
  it('lists host tools first, then module tools; a module tool takes a host tool’s name and its place', () => {
    const source = toolSourceOf([tool('search', 'host'), tool('fetch', 'host')], [tool('burn', 'module'), tool('search', 'module')])
    expect(names(source.list())).toEqual(['search: module', 'fetch: host', 'burn: module'])
    expect(source.get('search')?.description).toBe('module')
    expect(source.get('missing')).toBeUndefined()
    expect(source.get('toString')).toBeUndefined()
  })

  it('resolves a name the module lists twice to its later tool', () => {
    const source = toolSourceOf([], [tool('a', 'first'), tool('a', 'second')])
    expect(names(source.list())).toEqual(['a: second'])
  })

  it('is built once for a module: every child without host tools reads the same source, listed again each time', async () => {
    const local = flushing({ tools: [tool('a'), tool('b')] }, run)
    expect(local.toolSource).toBe(local.toolSource)
    expect(names(local.toolSource.list())).toEqual(['a: a does it', 'b: b does it'])
    expect(names(local.toolSource.list())).toEqual(['a: a does it', 'b: b does it'])
    // The listed tools are the guarded ones, which run the module's own code.
    await expect(local.toolSource.get('b')!.execute({}, {} as never)).resolves.toBe('b does it')
  })
})
