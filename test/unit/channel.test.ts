/**
 * The host's end of a runner channel, driven by hand: the version handshake, frames checked at
 * the boundary, a runner allowed to address only its own children, each child's phase and event
 * sequence checked. A failure settles the child (or, when no child accounts for it, stops the
 * runner) with a protocol diagnostic; nothing hangs.
 */
import { describe, expect, it } from 'vitest'
import { RunnerChannel } from '../../dist/parent/runners/channel.js'
import { RemoteChild, RunnerLostError } from '../../dist/parent/runners/remote-child.js'
import { PROTOCOL_VERSION, type HostMessage } from '../../dist/protocol/messages.js'
import { Runner } from '../../dist/worker/runner.js'
import type { SessionEvent } from 'subagent-worker'

const turn = () => new Promise((resolve) => setImmediate(resolve))
const never = new AbortController().signal

function channel() {
  const sent: HostMessage[] = []
  const kills: Array<{ diagnostic: string }> = []
  const ch = new RunnerChannel({
    kind: { noun: 'test runner', ended: 'stopped' },
    label: 'test runner',
    config: { maxParallelToolCalls: 8 },
    send: (frame) => void sent.push(...structuredClone(frame)),
    kill: (fault) => void kills.push(fault),
    crashed: () => {},
    changed: () => {},
  })
  const child = (id: string, outputSchema?: Record<string, unknown>) => {
    const events: SessionEvent[] = []
    const view = { id, options: {}, session: { header: { id, createdAt: 'now' }, events } }
    const spec = { id, header: view.session.header, options: {}, seed: [], descriptor: { mode: 'one-shot' as const, provider: 'spawn' }, ...(outputSchema ? { outputSchema } : {}) }
    const remote = new RemoteChild(spec, { view, append: (event) => void events.push(event), requested: () => {} }, ch, { placement: { models: new Map(), tools: new Map(), moduleTools: new Map(), refusal: () => undefined }, graceMs: 100 })
    // The host's copy of the child's record, as the test reads it.
    return Object.assign(remote, { events })
  }
  return { ch, sent, kills, child }
}

/** A child built and running. */
async function running(setup: ReturnType<typeof channel>, id = 'c1') {
  const child = setup.child(id)
  setup.ch.receive([{ type: 'created', child: id }])
  await child.created(never)
  const outcome = child.run([{ type: 'text', text: 'go' }])
  return { child, outcome }
}

describe('runner channel: handshake', () => {
  it('opens with a welcome carrying the version and the runner config, before any child', async () => {
    const setup = channel()
    setup.child('c1')
    await turn()
    expect(setup.sent.map((m) => m.type)).toEqual(['welcome', 'create'])
    expect(setup.sent[0]).toEqual({ type: 'welcome', v: PROTOCOL_VERSION, config: { maxParallelToolCalls: 8 } })
  })

  it('a runner speaking another version is refused with a clear error, and a start waiting on it is told why', async () => {
    const setup = channel()
    const child = setup.child('c1')
    setup.ch.receive([{ type: 'hello', v: 1 }])
    expect(setup.kills).toEqual([{ stopReason: 'error', diagnostic: `the test runner speaks frame protocol v1 but this host speaks v${PROTOCOL_VERSION}: both must come from the same version of subagent-worker` }])
    setup.ch.end(setup.kills[0] as never)
    await expect(child.created(never)).rejects.toThrow(/speaks frame protocol v1/)
  })

  it('a runner refuses a host speaking another version, and says so', async () => {
    const frames: unknown[][] = []
    const runner = new Runner((frame) => void frames.push(frame))
    runner.receive([{ type: 'welcome', v: 99, config: { maxParallelToolCalls: 8 } }])
    await turn()
    expect(frames.flat()).toEqual([
      { type: 'hello', v: PROTOCOL_VERSION },
      { type: 'fatal', error: expect.objectContaining({ name: 'ProtocolError', message: `the host speaks frame protocol v99 but this runner speaks v${PROTOCOL_VERSION}: both must come from the same version of subagent-worker` }) },
    ])
  })

  it('a runner that cannot read a frame from the host gives up on the channel and says why', async () => {
    const frames: unknown[][] = []
    const runner = new Runner((frame) => void frames.push(frame))
    runner.unreadable(new Error('Maximum call stack size exceeded'))
    await turn()
    expect(frames.flat()).toContainEqual({
      type: 'fatal',
      error: expect.objectContaining({ name: 'ProtocolError', message: 'a frame from the host could not be read: Maximum call stack size exceeded' }),
    })
  })
})

describe('runner channel: the host trusts nothing the runner sends', () => {
  it('a frame that is not a list of messages stops the runner with a protocol diagnostic', () => {
    const setup = channel()
    setup.ch.receive({ type: 'events' })
    expect(setup.kills).toEqual([{ stopReason: 'error', diagnostic: expect.stringMatching(/^protocol error: the test runner sent a malformed frame/) }])
  })

  it('a message for a child the runner does not host stops the runner; its own children are told why', async () => {
    const setup = channel()
    const { outcome } = await running(setup, 'mine')
    setup.ch.receive([{ type: 'idle', child: 'someone-else' }])
    expect(setup.kills).toEqual([{ stopReason: 'error', diagnostic: "protocol error: the test runner sent a 'idle' message for a child it does not host, so it was stopped" }])
    // From then on nothing it sends is read: not even an idle for its own child.
    setup.ch.receive([{ type: 'idle', child: 'mine' }])
    setup.ch.end(setup.kills[0] as never)
    expect(await outcome).toEqual({ fault: setup.kills[0] })
  })

  it('a malformed message about one child settles that child alone, and the runner is told to drop it', async () => {
    const setup = channel()
    const a = await running(setup, 'a')
    const b = await running(setup, 'b')
    setup.ch.receive([{ type: 'events', child: 'a', events: [{ seq: 0, type: 'made/up', data: {} }] }])
    expect(await a.outcome).toEqual({ fault: { stopReason: 'error', diagnostic: expect.stringMatching(/^protocol error: the test runner sent a malformed or unknown message of type "events"/) } })
    await turn()
    expect(setup.sent).toContainEqual({ type: 'drop', child: 'a' })
    expect(setup.kills).toEqual([])
    setup.ch.receive([{ type: 'dropped', child: 'a' }, { type: 'idle', child: 'b' }])
    expect(await b.outcome).toEqual({})
  })

  it('a gap or a repeat in a child’s event sequence is a protocol error, never accepted', async () => {
    // The host recorded events 0 and 1 (the turn's start and prompt) as it published.
    const gap = channel()
    const first = await running(gap)
    gap.ch.receive([{ type: 'events', child: 'c1', events: [{ seq: 2, type: 'subagent/descriptor', data: { mode: 'one-shot', provider: 'spawn' } }, { seq: 4, type: 'turn/end', data: { reason: { kind: 'completed' } } }] }])
    expect(await first.outcome).toEqual({ fault: { stopReason: 'error', diagnostic: "protocol error: the test runner sent event 4 where event 3 was due: a gap or a repeat in the child's record" } })
    // A runner that sends back what the host recorded repeats it.
    const repeat = channel()
    const second = await running(repeat)
    repeat.ch.receive([{ type: 'events', child: 'c1', events: [{ seq: 0, type: 'turn/start', data: {} }] }])
    expect(await second.outcome).toEqual({ fault: { stopReason: 'error', diagnostic: "protocol error: the test runner sent event 0 where event 2 was due: a gap or a repeat in the child's record" } })
  })

  it('a chunk that crossed as its text is recorded as the next event, an assistant/chunk text delta; the sequence is checked across both forms', async () => {
    const setup = channel()
    const child = setup.child('c1')
    setup.ch.receive([{ type: 'created', child: 'c1' }])
    await child.created(never)
    const outcome = child.run([{ type: 'text', text: 'go' }])
    setup.ch.receive([{ type: 'events', child: 'c1', events: ['Hel', { seq: 3, type: 'assistant/chunk', data: { chunk: { type: 'text-delta', text: 'lo' } } }, '!'] }])
    expect(child.events.slice(2)).toEqual([
      { seq: 2, type: 'assistant/chunk', data: { chunk: { type: 'text-delta', text: 'Hel' } } },
      { seq: 3, type: 'assistant/chunk', data: { chunk: { type: 'text-delta', text: 'lo' } } },
      { seq: 4, type: 'assistant/chunk', data: { chunk: { type: 'text-delta', text: '!' } } },
    ])
    // After three chunks, the next whole event is due at seq 5.
    setup.ch.receive([{ type: 'events', child: 'c1', events: ['?', { seq: 5, type: 'turn/start', data: {} }] }])
    expect(await outcome).toEqual({ fault: { stopReason: 'error', diagnostic: "protocol error: the test runner sent event 5 where event 6 was due: a gap or a repeat in the child's record" } })
  })

  it("a frame's texts are each its child's next event, in order, children side by side; the sequence runs on across events", async () => {
    const setup = channel()
    const { child: a } = await running(setup, 'a')
    const { child: b } = await running(setup, 'b')
    setup.ch.receive([{ type: 'texts', texts: ['a', 'one', 'b', 'uno', 'a', 'two', 'a', 'three'] }, { type: 'events', child: 'b', events: ['dos', { seq: 4, type: 'turn/start', data: {} }] }])
    const texts = (child: typeof a) => child.events.slice(2).map((event) => (event.type === 'assistant/chunk' ? `${event.seq} ${event.data.chunk.text}` : `${event.seq} ${event.type}`))
    expect(texts(a)).toEqual(['2 one', '3 two', '4 three'])
    expect(texts(b)).toEqual(['2 uno', '3 dos', '4 turn/start'])
  })

  it("each child gets its texts of a message as one events message, however the children's interleave (a node relays it so)", () => {
    const setup = channel()
    const heard: Record<string, unknown[]> = { a: [], b: [] }
    for (const id of ['a', 'b']) setup.ch.adopt({ id, busy: true, receive: (message) => void heard[id]!.push(message), broken: () => {}, end: () => {} })
    setup.ch.receive([{ type: 'texts', texts: ['a', 'one', 'b', 'uno', 'a', 'two', 'b', 'dos', 'a', 'three'] }, { type: 'events', child: 'a', events: ['four'] }])
    expect(heard).toEqual({
      a: [{ type: 'events', child: 'a', events: ['one', 'two', 'three'] }, { type: 'events', child: 'a', events: ['four'] }],
      b: [{ type: 'events', child: 'b', events: ['uno', 'dos'] }],
    })
    expect(setup.kills).toEqual([])
  })

  it("texts that are not pairs of a child and a text, or that name a child the runner does not host, stop the runner", async () => {
    const odd = channel()
    const { outcome } = await running(odd, 'a')
    odd.ch.receive([{ type: 'texts', texts: ['a', 'one', 'a'] }])
    expect(odd.kills).toEqual([{ stopReason: 'error', diagnostic: "protocol error: the test runner sent a 'texts' message of 3 items (a child and a text each), so it was stopped" }])
    void outcome
    const stranger = channel()
    await running(stranger, 'a')
    stranger.ch.receive([{ type: 'texts', texts: ['a', 'mine', 'z', 'theirs'] }])
    expect(stranger.kills).toEqual([{ stopReason: 'error', diagnostic: "protocol error: the test runner sent a 'texts' message for a child it does not host, so it was stopped" }])
    const notText = channel()
    const { child } = await running(notText, 'a')
    notText.ch.receive([{ type: 'texts', texts: ['a', { seq: 2, type: 'turn/start', data: {} }] }])
    expect(notText.kills).toEqual([{ stopReason: 'error', diagnostic: expect.stringMatching(/^protocol error: the test runner sent a malformed or unknown message of type "texts"/) }])
    expect(child.events).toHaveLength(2)
  })

  it('a message out of phase is a protocol error: events before the child was published', async () => {
    const setup = channel()
    const child = setup.child('c1')
    setup.ch.receive([{ type: 'created', child: 'c1' }])
    await child.created(never)
    setup.ch.receive([{ type: 'events', child: 'c1', events: [{ seq: 0, type: 'turn/start', data: {} }] }])
    expect(await child.run([{ type: 'text', text: 'late' }])).toEqual({ fault: { stopReason: 'error', diagnostic: "protocol error: the test runner sent a 'events' message while the child was created" } })
  })

  it('a structured result that does not match the requested schema is refused', async () => {
    const setup = channel()
    const child = setup.child('c1', { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] })
    setup.ch.receive([{ type: 'created', child: 'c1' }])
    await child.created(never)
    const outcome = child.run([{ type: 'text', text: 'go' }])
    setup.ch.receive([{ type: 'idle', child: 'c1', structured: { value: { n: 'not a number' } } }])
    expect(await outcome).toEqual({ fault: { stopReason: 'error', diagnostic: expect.stringContaining('a structured result that does not match the requested outputSchema') } })
  })

  it('a runner that dies while a child is being built rejects its start as lost, so it can be retried elsewhere', async () => {
    const setup = channel()
    const child = setup.child('c1')
    setup.ch.end({ stopReason: 'error', diagnostic: 'the thread crashed' })
    await expect(child.created(never)).rejects.toBeInstanceOf(RunnerLostError)
  })
})
