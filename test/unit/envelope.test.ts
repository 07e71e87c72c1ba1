/**
 * The remote envelope's reading bounds (src/remote/envelope.ts): what a sender controls is read
 * only within RUNNER_BOUNDS, before anything of it is looked at, since reading costs the host's loop.
 */
import { serialize } from 'node:v8'
import { describe, expect, it } from 'vitest'
import { decode, placementsOf } from '../../dist/remote/envelope.js'
import { RUNNER_BOUNDS } from '../../dist/protocol/bounds.js'

describe('the remote envelope', () => {
  it("a frame longer than one may carry is passed on untouched: no placement past the bound is looked for, so a sparse array's length costs nothing", () => {
    const frame: unknown[] = [{ type: 'hello', v: 1 }]
    frame[50_000_000] = { type: 'take', child: 'c', token: 't' }
    const { takes, rooms, rest } = placementsOf(frame)
    expect(takes).toEqual([])
    expect(rooms).toEqual([])
    expect(rest).toBe(frame)
  })

  it('a frame within the bound has its placements taken out, the rest kept in order', () => {
    const take = { type: 'take', child: 'c', token: 't' }
    const room = { type: 'room', level: 1, free: 2, placed: 0 }
    const frame = [{ type: 'hello', v: 1 }, take, { type: 'events', child: 'c' }, room]
    expect(placementsOf(frame)).toEqual({ takes: [take], rooms: [room], rest: [frame[0], frame[2]] })
  })

  it('an envelope larger than a frame may be is refused before it is decoded', () => {
    const big = Buffer.alloc(RUNNER_BOUNDS.pipeFrameBytes + 1)
    const read = decode(big)
    expect(read).toBeInstanceOf(Error)
    expect((read as Error & { code?: string }).code).toBe('ERR_SUBAGENT_REMOTE_SHAPE')
    expect((read as Error).message).toBe(`an envelope of ${big.length} bytes (at most ${RUNNER_BOUNDS.pipeFrameBytes})`)
    expect(decode(serialize(['node-1', [{ type: 'hello', v: 1 }], 'link-1']))).toEqual({ from: 'node-1', link: 'link-1', frame: [{ type: 'hello', v: 1 }] })
  })
})
