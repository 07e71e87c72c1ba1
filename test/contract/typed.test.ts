/**
 * Types that infer, checked where a caller meets them: `defineTool` reads its arguments' type from
 * `parameters` (a JSON Schema literal or a zod 4 schema), and `structured` is typed from
 * `outputSchema`. The type assertions are checked by the test build (`tsc -p test`); the runtime
 * half shows that a zod schema works on both transports, in a host tool, a module tool and as
 * an outputSchema, exactly as the JSON Schema it converts to.
 */
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, expectTypeOf, it } from 'vitest'
import { z } from 'zod'
import { defineTool, textOf, textResponse, toolCallResponse, type SubagentResult, type ToolDefinition } from 'subagent-worker'
import { closeHosts, setup, TRANSPORTS } from '../support/harness.js'
import { toolResults } from '../support/loop-helpers.js'

afterEach(closeHosts)

const ZOD_MODULE = fileURLToPath(new URL('../fixtures/zod-module.mjs', import.meta.url))

describe('defineTool infers its arguments', () => {
  it('from a JSON Schema literal: required properties are required, others optional', () => {
    const tool = defineTool({
      name: 'measure',
      description: 'Counts words.',
      parameters: { type: 'object', properties: { text: { type: 'string' }, limit: { type: 'integer' } }, required: ['text'] },
      execute: ({ text, limit }) => {
        expectTypeOf(text).toEqualTypeOf<string>()
        expectTypeOf(limit).toEqualTypeOf<number | undefined>()
        return text.split(' ').length
      },
    })
    expectTypeOf(tool).toExtend<ToolDefinition<{ text: string; limit?: number }>>()
    expect(tool.parameters).toEqual({ type: 'object', properties: { text: { type: 'string' }, limit: { type: 'integer' } }, required: ['text'] })
  })

  it('from a zod schema, converted once to the JSON Schema that crosses threads', () => {
    const tool = defineTool({
      name: 'pick',
      description: 'Picks a colour.',
      parameters: z.object({ colour: z.enum(['red', 'green']), note: z.string().optional() }),
      execute: ({ colour, note }) => {
        expectTypeOf(colour).toEqualTypeOf<'red' | 'green'>()
        expectTypeOf(note).toEqualTypeOf<string | undefined>()
        return colour
      },
    })
    expect(tool.parameters).toMatchObject({
      type: 'object',
      properties: { colour: { type: 'string', enum: ['red', 'green'] }, note: { type: 'string' } },
      required: ['colour'],
    })
    expect(() => structuredClone(tool.parameters)).not.toThrow()
  })

  it('an explicit type argument still wins, and a schema typed only as object gives a plain record', () => {
    const explicit = defineTool<{ n: number }>({ name: 'n', description: 'n', parameters: { type: 'object' }, execute: ({ n }) => n + 1 })
    expectTypeOf(explicit).toEqualTypeOf<ToolDefinition<{ n: number }>>()
    const loose: object = { type: 'object' }
    const plain = defineTool({ name: 'p', description: 'p', parameters: loose, execute: (args) => Object.keys(args).length })
    expectTypeOf(plain).toEqualTypeOf<ToolDefinition<Record<string, unknown>>>()
  })

  it('a zod schema that cannot be a tool parameter is refused when the tool is defined, naming it', () => {
    expect(() => defineTool({ name: 'bad', description: 'b', parameters: z.string(), execute: () => '' })).toThrow(/tool "bad" parameters/)
  })
})

describe.each(TRANSPORTS)('zod schemas at runtime [%s]', (transport) => {
  it('a host tool with zod parameters: a valid call runs, a wrong one is refused naming the field', async () => {
    const fx = setup(transport, [
      toolCallResponse('c1', 'pick', { colour: 'red' }),
      toolCallResponse('c2', 'pick', { colour: 'blue' }),
      textResponse('done'),
    ])
    const calls: string[] = []
    fx.host.tools.register(
      defineTool({
        name: 'pick',
        description: 'Picks a colour.',
        parameters: z.object({ colour: z.enum(['red', 'green']) }),
        execute: ({ colour }) => {
          calls.push(colour)
          return `picked ${colour}`
        },
      }),
    )
    const run = await fx.host.spawn.start({ prompt: 'pick', parent: fx.parent })
    expect((await run.result).stopReason).toBe('completed')
    const results = toolResults(fx.host.agents.get(run.id)?.session.events ?? [])
    expect(calls).toEqual(['red'])
    expect(results[0]).toMatchObject({ callId: 'c1', isError: false, content: [{ type: 'text', text: 'picked red' }] })
    expect(results[1]).toMatchObject({ callId: 'c2', isError: true })
    expect(textOf(results[1]?.content as never)).toMatch(/colour/)
    await run.dispose()
  })

  it('a module tool with zod parameters runs where the child runs', async () => {
    const fx = setup(transport, [toolCallResponse('c1', 'repeat', { word: 'la', times: 3 }), textResponse('sung')], { agentModule: ZOD_MODULE })
    const run = await fx.host.spawn.start({ prompt: 'sing', parent: fx.parent })
    expect((await run.result).stopReason).toBe('completed')
    expect(toolResults(fx.host.agents.get(run.id)?.session.events ?? [])[0]).toMatchObject({ isError: false, content: [{ type: 'text', text: 'la la la' }] })
    await run.dispose()
  })

  it('a zod outputSchema types structured and is enforced like its JSON Schema', async () => {
    const fx = setup(transport, [
      toolCallResponse('s1', 'structured_output', { label: 'maybe' }),
      toolCallResponse('s2', 'structured_output', { label: 'bug', score: 0.5 }),
    ])
    const outputSchema = z.object({ label: z.enum(['bug', 'feature']), score: z.number() })
    const result = await fx.host.spawn.run({ prompt: 'classify', parent: fx.parent, outputSchema })
    expectTypeOf(result).toEqualTypeOf<SubagentResult<{ label: 'bug' | 'feature'; score: number }>>()
    expect(result.stopReason).toBe('completed')
    expect(result.structured).toEqual({ label: 'bug', score: 0.5 })
    const request = fx.model.requests[0]
    expect(request?.tools?.find((t) => t.name === 'structured_output')?.parameters).toMatchObject({ required: ['label', 'score'] })
  })

  it('a JSON Schema literal types structured too; an untyped schema leaves it unknown', async () => {
    const fx = setup(transport, [toolCallResponse('s1', 'structured_output', { answer: 'yes' }), toolCallResponse('s2', 'structured_output', { answer: 'no' })])
    const run = await fx.host.spawn.start({
      prompt: 'answer',
      parent: fx.parent,
      outputSchema: { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'], additionalProperties: false },
    })
    const result = await run.result
    expectTypeOf(result.structured).toEqualTypeOf<{ answer: string } | undefined>()
    expect(result.structured?.answer).toBe('yes')
    await run.dispose()
    const loose: object = { type: 'object' }
    const untyped = await fx.host.fork.run({ prompt: 'answer', parent: fx.parent, outputSchema: loose })
    expectTypeOf(untyped.structured).toEqualTypeOf<unknown>()
    expect(untyped.structured).toEqual({ answer: 'no' })
  })
})
