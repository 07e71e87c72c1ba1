/**
 * The runner channel's one phase (src/parent/runners/channel.ts), driven by hand: the handshake
 * moves it on, a protocol error distrusts it, the runner's end ends it, and each message is
 * judged by the phase it arrives in.
 */
import { describe, expect, it } from 'vitest'
import { RunnerChannel, type Fault } from '../../dist/parent/runners/channel.js'
import { PROTOCOL_VERSION } from '../../dist/protocol/messages.js'

function channel() {
  const kills: Fault[] = []
  let discarded = 0
  const subject = new RunnerChannel({
    kind: { noun: 'worker thread', ended: 'terminated' },
    label: 'worker thread 1',
    config: { maxParallelToolCalls: 1 },
    send: () => {},
    kill: (fault) => void kills.push(fault),
    crashed: () => {},
    changed: () => {},
    discard: () => void discarded++,
  })
  return { subject, kills, discarded: () => discarded }
}

const hello = { type: 'hello', v: PROTOCOL_VERSION }
const pong = (n: number) => ({ type: 'pong', n })

describe('a runner channel', () => {
  it('is greeted by a hello in its version, loading until ready, judgeable once ready, and remembers how far it came after its end', () => {
    const { subject, kills } = channel()
    expect([subject.reached, subject.loading]).toEqual(['opening', true])
    subject.receive([hello])
    expect([subject.reached, subject.loading, subject.judgeable]).toEqual(['greeted', true, false])
    subject.receive([{ type: 'ready', hooks: ['beforeStep'] }])
    expect([subject.reached, subject.loading, subject.judgeable]).toEqual(['ready', false, true])
    expect(subject.hooks).toEqual(new Set(['beforeStep']))
    // A runner may say ready again: no error.
    subject.receive([{ type: 'ready' }])
    expect(kills).toEqual([])
    subject.end({ stopReason: 'aborted', diagnostic: 'closed' })
    expect([subject.reached, subject.loading, subject.judgeable]).toEqual(['ready', false, false])
    expect(subject.hooks).toEqual(new Set(['beforeStep']))
  })

  it('a second hello is a protocol error: a runner greets its channel once', () => {
    const { subject, kills } = channel()
    subject.receive([hello])
    subject.receive([hello])
    expect(kills).toEqual([{ stopReason: 'error', diagnostic: `protocol error: the worker thread 1 sent a second 'hello', so it was stopped` }])
  })

  it('a ready before the hello is a protocol error', () => {
    const { subject, kills, discarded } = channel()
    subject.receive([{ type: 'ready' }])
    expect(kills).toEqual([{ stopReason: 'error', diagnostic: `protocol error: the worker thread 1 sent a 'ready' before its 'hello', so it was stopped` }])
    expect([subject.reached, subject.judgeable, discarded()]).toEqual(['opening', false, 1])
  })

  it('a hello in another version stops the runner, and it never counts as greeted', () => {
    const { subject, kills } = channel()
    subject.receive([{ type: 'hello', v: PROTOCOL_VERSION + 1 }])
    expect(kills).toHaveLength(1)
    expect(kills[0]!.diagnostic).toMatch(/version/)
    subject.end(kills[0]!)
    expect([subject.reached, subject.loading]).toEqual(['opening', false])
  })

  it('once distrusted, reads nothing more, and keeps how far it had come', () => {
    const { subject, kills } = channel()
    subject.receive([hello])
    subject.receive([pong(1)])
    expect(kills.map((fault) => fault.diagnostic)).toEqual([expect.stringMatching(/an unsolicited pong/)])
    // Distrusted: a second violation, or anything else, is not read.
    subject.receive([pong(2), { type: 'fatal', error: { name: 'Error', message: 'x' } }])
    expect(kills).toHaveLength(1)
    expect([subject.reached, subject.loading]).toEqual(['greeted', false])
    subject.end(kills[0]!)
    expect(subject.reached).toBe('greeted')
  })

  it('once ended, pings and reads nothing', () => {
    const { subject, kills } = channel()
    subject.receive([hello])
    subject.end({ stopReason: 'aborted', diagnostic: 'closed' })
    subject.ping({ at: 0, held: 0 })
    expect(subject.pinged).toBeUndefined()
    subject.receive([pong(1)])
    expect(kills).toEqual([])
  })
})
