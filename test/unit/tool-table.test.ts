/**
 * A runner's table of its module's tools (src/worker/tool-table.ts): a model call names a tool by
 * its index only where the schema the child sees is exactly the table's; anything else crosses whole.
 */
import { describe, expect, it } from 'vitest'
import { ToolTable } from '../../dist/worker/tool-table.js'

const tool = (name: string, description = `${name} does it`, parameters: object = { type: 'object', properties: {} }) => ({ name, description, parameters, execute: async () => 'ok' })

describe('ToolTable', () => {
  it('names each module tool by its index, and gives any other tool its whole schema', () => {
    const [a, b] = [tool('a'), tool('b')]
    const table = new ToolTable([a, b])
    expect(table.schemas).toEqual([a, b].map(({ name, description, parameters }) => ({ name, description, parameters })))
    const own = { name: 'own', description: 'an agent-registered tool', parameters: {} }
    expect(table.refer([{ ...table.schemas[1]! }, own, { ...table.schemas[0]! }])).toEqual([1, own, 0])
  })

  it('gives the whole schema where a tool of the same name is not the module’s (another description, other parameters)', () => {
    const table = new ToolTable([tool('a')])
    const described = { ...table.schemas[0]!, description: 'another' }
    const shaped = { ...table.schemas[0]!, parameters: { type: 'object', properties: {} } }
    expect(table.refer([described, shaped])).toEqual([described, shaped])
  })

  it('resolves a name the module lists twice to its later tool, as the child’s tool map does', () => {
    const table = new ToolTable([tool('a', 'first'), tool('a', 'second')])
    expect(table.refer([{ ...table.schemas[1]! }])).toEqual([1])
    expect(table.refer([{ ...table.schemas[0]! }])).toEqual([table.schemas[0]])
  })
})
