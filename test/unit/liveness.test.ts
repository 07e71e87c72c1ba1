/**
 * The SilenceJudge (src/parent/runners/liveness.ts) on a fake clock and a hand-run poll phase: a held loop
 * is discounted, a verdict waits for the next poll phase, and a dead peer is still judged.
 */
import { describe, expect, it } from 'vitest'
import { SilenceJudge, type Mark } from '../../dist/parent/runners/liveness.js'

/** A judge on a clock the test moves, with the poll phase's callbacks run when the test says. */
function rig(limitMs = 1000, intervalMs = 100) {
  let now = 0
  let polls: Array<() => void> = []
  const judge = new SilenceJudge({ limitMs, intervalMs, now: () => now, afterPoll: (fn) => void polls.push(fn) })
  const verdicts: Array<{ peer: string; ms: number }> = []
  const marks = new Map<string, Mark | undefined>()
  return {
    judge,
    marks,
    verdicts,
    advance: (ms: number) => void (now += ms),
    /** One interval tick; the loop's poll phase does not run yet. */
    check: () => judge.check(marks.keys(), (peer) => marks.get(peer), (peer, ms) => void verdicts.push({ peer, ms })),
    /** The poll phase after the tick, and the verdicts waiting on it. */
    poll: () => {
      const due = polls
      polls = []
      for (const fn of due) fn()
    },
    /** `n` ticks on time, each followed by its poll phase. */
    run(n: number) {
      for (let i = 0; i < n; i++) {
        now += intervalMs
        this.check()
        this.poll()
      }
    },
  }
}

describe('SilenceJudge', () => {
  it('a peer silent past the limit on a free loop is judged, on the first tick past it, with its silence', () => {
    const r = rig()
    r.marks.set('dead', r.judge.mark())
    r.run(10)
    expect(r.verdicts).toEqual([])
    r.run(1)
    expect(r.verdicts).toEqual([{ peer: 'dead', ms: 1100 }])
  })

  it('a peer without a mark owes nothing and is never judged', () => {
    const r = rig()
    r.marks.set('answered', undefined)
    r.run(100)
    expect(r.verdicts).toEqual([])
  })

  it('a loop held 3 s does not blame the peer for them: the late tick counts as held time', () => {
    const r = rig()
    r.marks.set('live', r.judge.mark())
    r.run(2)
    r.advance(3000) // the judge's loop is blocked
    const suspects = r.check()
    r.poll()
    expect(suspects.size).toBe(0)
    expect(r.verdicts).toEqual([])
    expect(r.judge.held).toBe(2900)
    expect(r.judge.silentFor(r.marks.get('live'))).toBe(300)
  })

  it('a verdict waits for the next poll phase: an answer read there clears it', () => {
    const r = rig()
    r.marks.set('slow', r.judge.mark())
    r.run(10)
    r.advance(100)
    expect([...r.check()]).toEqual(['slow'])
    // The poll phase reads the answer that came in meanwhile: the peer owes nothing any more.
    r.marks.set('slow', undefined)
    r.poll()
    expect(r.verdicts).toEqual([])
  })

  it('a hold between the tick and the poll phase is the judge\'s too', () => {
    const r = rig()
    r.marks.set('peer', r.judge.mark())
    r.run(10)
    r.advance(100)
    expect(r.check().size).toBe(1)
    r.advance(5000) // another timer's callback blocks the loop before the poll phase
    r.poll()
    expect(r.verdicts).toEqual([{ peer: 'peer', ms: 1100 }])
    // Counted once: the next tick on time adds nothing for the same hold.
    r.advance(5000 + 100)
    r.check()
    expect(r.judge.held).toBe(5000 + 5000)
  })

  it('a dead peer is still judged while the loop is held at times: the verdict is late by the held time only', () => {
    const r = rig()
    r.marks.set('dead', r.judge.mark())
    r.run(5)
    r.advance(3000) // 100 ms of it counts: the tick was due then
    r.check()
    r.poll()
    r.run(4)
    expect(r.verdicts).toEqual([])
    r.run(1)
    expect(r.verdicts).toEqual([{ peer: 'dead', ms: 1100 }])
  })

  it('a loop late on every tick (a loaded machine) still judges a dead peer, after limit / interval ticks', () => {
    const r = rig()
    r.marks.set('dead', r.judge.mark())
    for (let i = 0; i < 11; i++) {
      r.advance(250) // each tick 150 ms late
      r.check()
      r.poll()
    }
    expect(r.verdicts).toEqual([{ peer: 'dead', ms: 1100 }])
  })

  it('a mark made after a hold does not get the hold discounted', () => {
    const r = rig()
    r.run(1)
    r.advance(3000)
    r.check()
    r.poll()
    r.marks.set('later', r.judge.mark())
    r.run(11)
    expect(r.verdicts).toEqual([{ peer: 'later', ms: 1100 }])
  })

  it('resume(): a pause of the interval timer is no hold', () => {
    const r = rig()
    r.advance(60_000)
    r.judge.resume()
    r.marks.set('peer', r.judge.mark())
    r.run(1)
    expect(r.judge.held).toBe(0)
  })
})
