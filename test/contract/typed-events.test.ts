/**
 * CONTRACT.md §12: `SessionEvent` is a discriminated union. The type assertions are checked by the
 * test build (`tsc -p test`): narrowing on `type` types `data`, `isEvent` and `EventOf` still do.
 */
import { afterEach, describe, expect, expectTypeOf, it } from 'vitest'
import { isEvent, textResponse, type ContentBlock, type EventOf, type SessionEvent, type Usage } from 'subagent-worker'
import { closeHosts, setup } from '../support/harness.js'

afterEach(closeHosts)

/** What a progress display does with a child's events: no cast anywhere. */
function describeEvent(e: SessionEvent): string {
  if (e.type === 'assistant/chunk') return e.data.chunk.text
  if (e.type === 'assistant/message') return `message (${e.data.usage?.outputTokens ?? 0} tokens)`
  if (e.type === 'tool/result') return `${e.data.name}${e.data.isError ? ` failed: ${e.data.code ?? ''}` : ''}`
  if (e.type === 'turn/end') return e.data.reason.kind
  return e.type
}

describe('SessionEvent narrows on type', () => {
  it('types data per event type', () => {
    const e = { seq: 0, type: 'assistant/chunk', data: { chunk: { type: 'text-delta', text: 'hi' } } } as SessionEvent
    if (e.type === 'assistant/chunk') expectTypeOf(e.data.chunk).toEqualTypeOf<{ type: 'text-delta'; text: string }>()
    if (e.type === 'assistant/message') {
      expectTypeOf(e.data.content).toEqualTypeOf<ContentBlock[]>()
      expectTypeOf(e.data.usage).toEqualTypeOf<Usage | undefined>()
    }
    // @ts-expect-error data is not a chunk until type says so
    void e.data.chunk
    // @ts-expect-error a type the library does not know narrows to nothing
    void (e.type === 'assistant/chunkk')
    expect(describeEvent(e)).toBe('hi')
  })

  it('isEvent and EventOf keep working', () => {
    const e = { seq: 1, type: 'turn/end', data: { reason: { kind: 'completed' } } } as SessionEvent
    expectTypeOf<EventOf<'turn/end'>>().toExtend<SessionEvent>()
    expectTypeOf<EventOf<'tool/result'>['data']['callId']>().toEqualTypeOf<string>()
    expect(isEvent(e, 'turn/end') && e.data.reason.kind).toBe('completed')
  })

  it("a child's recorded events read without a cast", async () => {
    const { host, parent } = setup('inline', [textResponse('typed answer')])
    const run = await host.spawn.start({ prompt: 'go', parent, agentOptions: { provider: 'scripted' } })
    await run.result
    const events = host.agents.get(run.id)!.session.events
    expect(events.map(describeEvent)).toEqual(['turn/start', 'user/message', 'subagent/descriptor', 'typed answer', expect.stringMatching(/^message \(\d+ tokens\)$/), 'completed'])
    await run.dispose()
  })
})
