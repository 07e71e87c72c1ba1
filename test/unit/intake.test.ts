/**
 * The bounded intake of one runner's frames (RUNNER_BOUNDS), driven by hand: a frame too long or
 * too large is refused unread, the host reads a runner's share per event-loop turn and the rest
 * in order on later turns, and a runner that fills its share turn after turn is refused.
 */
import { describe, expect, it } from 'vitest'
import { FrameIntake } from '../../dist/parent/runners/intake.js'
import { estimatedSize, RUNNER_BOUNDS } from '../../dist/protocol/bounds.js'
import { fromWire } from '../../dist/protocol/messages.js'

const turn = () => new Promise((resolve) => setImmediate(resolve))

function intake() {
  const read: unknown[] = []
  const violations: string[] = []
  const pauses: boolean[] = []
  const it = new FrameIntake({ read: (frame) => void read.push(frame), violation: (what) => void violations.push(what), pause: (paused) => void pauses.push(paused) })
  return { it, read, violations, pauses }
}

describe('estimatedSize', () => {
  it('counts strings by their length and every value at 16 bytes', () => {
    expect(estimatedSize({ text: 'x'.repeat(1000) }, Infinity)).toBe(16 + 4 + 16 + 1000)
  })

  it('stops as soon as the estimate passes the limit, however large the value', () => {
    const huge = new Array(10_000_000).fill(0)
    expect(estimatedSize(huge, 1000)).toBeGreaterThan(1000)
    expect(estimatedSize(huge, 1000)).toBeLessThan(1100)
  })

  it('a walk cut short at the limit leaves nothing behind for the next value to count', () => {
    const value = { text: 'x'.repeat(1000), list: ['a', 'b'] }
    const fresh = estimatedSize(value, Infinity)
    // Cut off with values still waiting to be measured: the array [1, 2, 3], then the key 'k'.
    expect(estimatedSize([[1, 2, 3], { a: 'y'.repeat(500), b: [4, 5] }], 60)).toBe(16 + 2 * 16 + 1 + 16)
    expect(estimatedSize(new Map([['k', ['v', 'w']]]), 50)).toBe(16 + 2 * 16 + 16)
    expect(estimatedSize(value, Infinity)).toBe(fresh)
    expect(fresh).toBe(16 + (4 + 16 + 1000) + (4 + 16) + 2 * (16 + 1))
  })

  it('a walk that throws leaves nothing behind either, and a value that grew the stack large is measured the same after it', () => {
    const value = { text: 'x'.repeat(100), list: ['a', 'b'] }
    const fresh = estimatedSize(value, Infinity)
    const throwing = { list: [1, 2, 3], get bad(): never { throw new Error('a getter that throws') } }
    expect(() => estimatedSize([throwing, 'waiting'], Infinity)).toThrow('a getter that throws')
    expect(estimatedSize(value, Infinity)).toBe(fresh)
    expect(estimatedSize(new Array(100_000).fill('y'), Infinity)).toBe(16 + 100_000 * 17)
    expect(estimatedSize(value, Infinity)).toBe(fresh)
  })

  it('leaves out the value of an omitted key of the value itself, counting the key as if the value were absent', () => {
    const message = { type: 'events', child: 'c', events: [{ text: 'x'.repeat(1000) }] }
    expect(estimatedSize(message, Infinity, 'events')).toBe(estimatedSize({ ...message, events: undefined }, Infinity))
    expect(estimatedSize({ inner: { events: 'x'.repeat(1000) } }, Infinity, 'events')).toBe(estimatedSize({ inner: { events: 'x'.repeat(1000) } }, Infinity))
  })

  it('counts what a structured clone carries that JSON would not: Map and Set entries, buffers', () => {
    expect(estimatedSize(new Map([['k', 'v'.repeat(100)]]), Infinity)).toBeGreaterThan(100)
    expect(estimatedSize(new Set(['s'.repeat(100)]), Infinity)).toBeGreaterThan(100)
    expect(estimatedSize(new Uint8Array(1000), Infinity)).toBeGreaterThan(1000)
  })
})

describe('FrameIntake', () => {
  it('refuses a frame of more than frameMessages messages without reading it', () => {
    const { it: intakeOf, read, violations } = intake()
    intakeOf.accept(new Array(RUNNER_BOUNDS.frameMessages + 1).fill({ type: 'ready' }))
    expect(read).toEqual([])
    expect(violations).toEqual([`a frame of ${RUNNER_BOUNDS.frameMessages + 1} messages (one frame may carry at most ${RUNNER_BOUNDS.frameMessages})`])
  })

  it('reads a frame of exactly frameMessages messages', () => {
    const { it: intakeOf, read, violations } = intake()
    intakeOf.accept(new Array(RUNNER_BOUNDS.frameMessages).fill({ type: 'ready' }))
    expect(read).toHaveLength(1)
    expect(violations).toEqual([])
    intakeOf.close()
  })

  it('refuses an event over eventBytes, and a frame over frameBytes made of smaller events', () => {
    const big = { seq: 0, type: 'assistant/chunk', data: { text: 'x'.repeat(RUNNER_BOUNDS.eventBytes) } }
    const one = intake()
    one.it.accept([{ type: 'events', child: 'c', events: [big] }])
    expect(one.violations).toEqual([`an event larger than ${RUNNER_BOUNDS.eventBytes} bytes`])
    const many = intake()
    const event = { seq: 0, type: 'assistant/chunk', data: { text: 'x'.repeat(RUNNER_BOUNDS.eventBytes / 2) } }
    many.it.accept([{ type: 'events', child: 'c', events: new Array(130).fill(event) }])
    expect(many.violations).toEqual([`a frame larger than ${RUNNER_BOUNDS.frameBytes} bytes`])
    expect([...one.read, ...many.read]).toEqual([])
  })

  it('counts a chunk that crossed as its text as the event the host rebuilds for it, not as a bare string', () => {
    const rebuilt = estimatedSize(fromWire('', 0), Infinity)
    expect(rebuilt).toBeGreaterThan(estimatedSize('', Infinity) * 5)
    // Empty texts measure 16 bytes each as strings; as the events they stand for, this frame is over the bound.
    const count = Math.ceil(RUNNER_BOUNDS.frameBytes / rebuilt) + 1
    const flood = intake()
    flood.it.accept([{ type: 'events', child: 'c', events: new Array(count).fill('') }])
    expect(flood.violations).toEqual([`a frame larger than ${RUNNER_BOUNDS.frameBytes} bytes`])
    expect(flood.read).toEqual([])
    const text = intake()
    text.it.accept([{ type: 'events', child: 'c', events: ['x'.repeat(RUNNER_BOUNDS.eventBytes)] }])
    expect(text.violations).toEqual([`an event larger than ${RUNNER_BOUNDS.eventBytes} bytes`])
    // A frame well inside the bounds is read.
    const fine = intake()
    fine.it.accept([{ type: 'events', child: 'c', events: new Array(1000).fill('token ') }])
    expect(fine.violations).toEqual([])
    expect(fine.read).toHaveLength(1)
  })

  it("counts a frame's texts as the messages and the events the host makes of them", () => {
    const pairs = (n: number, text = 'x', children = n) => Array.from({ length: n }, (_, i) => [`c${i % children}`, text]).flat()
    // One message for each child it names, as each child's own events message would count.
    const many = intake()
    many.it.accept([{ type: 'texts', texts: pairs(RUNNER_BOUNDS.frameMessages + 1) }])
    expect(many.violations).toEqual([`a frame of ${RUNNER_BOUNDS.frameMessages + 1} messages (one frame may carry at most ${RUNNER_BOUNDS.frameMessages})`])
    const few = intake()
    few.it.accept([{ type: 'texts', texts: pairs(RUNNER_BOUNDS.frameMessages + 1, 'x', 7) }])
    expect(few.violations).toEqual([])
    expect(few.read).toHaveLength(1)
    const flood = intake()
    flood.it.accept([{ type: 'texts', texts: pairs(Math.ceil(RUNNER_BOUNDS.frameBytes / (RUNNER_BOUNDS.eventBytes / 2)) + 1, 'x'.repeat(RUNNER_BOUNDS.eventBytes / 2)) }])
    expect(flood.violations).toEqual([`a frame larger than ${RUNNER_BOUNDS.frameBytes} bytes`])
    const big = intake()
    big.it.accept([{ type: 'texts', texts: ['c', 'x'.repeat(RUNNER_BOUNDS.eventBytes)] }])
    expect(big.violations).toEqual([`an event larger than ${RUNNER_BOUNDS.eventBytes} bytes`])
    // Whatever else the message carries is measured too, before it is checked.
    const padded = intake()
    padded.it.accept([{ type: 'texts', texts: ['c', 'x'], pad: 'x'.repeat(RUNNER_BOUNDS.frameBytes) }])
    expect(padded.violations).toEqual([`a frame larger than ${RUNNER_BOUNDS.frameBytes} bytes`])
    expect([...many.read, ...flood.read, ...big.read, ...padded.read]).toEqual([])
    const fine = intake()
    fine.it.accept([{ type: 'texts', texts: pairs(1000, 'token ') }])
    expect(fine.violations).toEqual([])
    expect(fine.read).toHaveLength(1)
  })

  it('reads turnFrames frames in a turn, pauses the endpoint, and reads the rest in order on the next turn', async () => {
    const { it: intakeOf, read, pauses, violations } = intake()
    const frames = Array.from({ length: RUNNER_BOUNDS.turnFrames + 100 }, (_, i) => [{ type: 'pong', n: i }])
    for (const frame of frames) intakeOf.accept(frame)
    expect(read).toHaveLength(RUNNER_BOUNDS.turnFrames)
    expect(pauses).toEqual([true])
    await turn()
    expect(read).toEqual(frames)
    expect(pauses).toEqual([true, false])
    expect(violations).toEqual([])
    intakeOf.close()
  })

  it('a runner that fills its share fullTurns turns in a row is refused', async () => {
    const { it: intakeOf, violations } = intake()
    const frame = [{ type: 'ready' }]
    for (let t = 0; t <= RUNNER_BOUNDS.fullTurns && violations.length === 0; t++) {
      for (let i = 0; i < RUNNER_BOUNDS.turnFrames; i++) intakeOf.accept(frame)
      await turn()
    }
    expect(violations).toEqual([
      `frames faster than the host can read them (${RUNNER_BOUNDS.turnFrames} frames or ${RUNNER_BOUNDS.turnMessages} messages a turn, ${RUNNER_BOUNDS.fullTurns} turns in a row)`,
    ])
  })

  it('a turn below the share starts the count again: a burst is not a flood', async () => {
    const { it: intakeOf, violations } = intake()
    const frame = [{ type: 'ready' }]
    for (let t = 0; t < RUNNER_BOUNDS.fullTurns * 2; t++) {
      const frames = t % (RUNNER_BOUNDS.fullTurns / 2) === 0 ? 1 : RUNNER_BOUNDS.turnFrames
      for (let i = 0; i < frames; i++) intakeOf.accept(frame)
      await turn()
    }
    expect(violations).toEqual([])
    intakeOf.close()
  })

  it('refuses frames beyond backlogMessages waiting, where the endpoint cannot pause', () => {
    const { it: intakeOf, violations } = intake()
    const frame = new Array(1000).fill({ type: 'ready' })
    for (let i = 0; i < RUNNER_BOUNDS.turnMessages / 1000 + RUNNER_BOUNDS.backlogMessages / 1000 + 1 && violations.length === 0; i++) intakeOf.accept(frame)
    expect(violations).toEqual([`frames faster than the host can read them (more than ${RUNNER_BOUNDS.backlogMessages} messages waiting to be read)`])
  })

  it('drain reads every frame still waiting, in order (the runner is gone)', () => {
    const { it: intakeOf, read } = intake()
    const frames = Array.from({ length: RUNNER_BOUNDS.turnFrames + 10 }, (_, i) => [{ type: 'pong', n: i }])
    for (const frame of frames) intakeOf.accept(frame)
    intakeOf.drain()
    expect(read).toEqual(frames)
    intakeOf.close()
  })
})
