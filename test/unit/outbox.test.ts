/** Coalescing: one frame per event-loop turn, amendable messages, code run only after what was queued is sent, and one bad message costing only its owner. */
import { describe, expect, it } from 'vitest'
import { Outbox } from '../../dist/protocol/outbox.js'

interface Message {
  child: string
  n: number
  bad?: boolean
}

function outbox() {
  const frames: Message[][] = []
  const unsendable: Message[] = []
  const box = new Outbox<Message>({
    send(frame) {
      if (frame.some((m) => m.bad)) throw new Error('could not be cloned')
      frames.push(frame.map((m) => ({ ...m })))
    },
    ownerOf: (m) => m.child,
    unsendable: (m) => void unsendable.push(m),
  })
  return { box, frames, unsendable }
}

const turn = () => new Promise((resolve) => setImmediate(resolve))

describe('outbox', () => {
  it('a burst of messages from many owners crosses as one frame, in order', async () => {
    const { box, frames } = outbox()
    for (let i = 0; i < 1000; i++) box.push({ child: `c${i % 10}`, n: i })
    expect(frames).toEqual([])
    await turn()
    expect(frames).toHaveLength(1)
    expect(frames[0]!.map((m) => m.n)).toEqual(Array.from({ length: 1000 }, (_, i) => i))
  })

  it('a message queued in the current epoch can still be amended; a sent one cannot', async () => {
    const { box, frames } = outbox()
    const first = { child: 'a', n: 1 }
    box.push(first)
    const epoch = box.epoch
    first.n = 2
    await turn()
    expect(box.epoch).toBe(epoch + 1)
    expect(frames).toEqual([[{ child: 'a', n: 2 }]])
  })

  it('code guarded by afterSent runs at once when nothing is queued, else right after the send', async () => {
    const { box, frames } = outbox()
    const seen: number[] = []
    await box.afterSent(() => seen.push(frames.length))
    box.push({ child: 'a', n: 1 })
    const guarded = [box.afterSent(() => frames.length), box.afterSent(() => frames.length)]
    box.push({ child: 'b', n: 2 }) // queued before the guarded code runs: it is sent first
    expect(await Promise.all(guarded)).toEqual([1, 1])
    expect(seen).toEqual([0])
    expect(frames).toEqual([[{ child: 'a', n: 1 }, { child: 'b', n: 2 }]])
  })

  it('a message that cannot be sent costs only its owner: the rest of the frame still goes', async () => {
    const { box, frames, unsendable } = outbox()
    box.push({ child: 'a', n: 1 })
    box.push({ child: 'b', n: 2, bad: true })
    box.push({ child: 'b', n: 3 })
    box.push({ child: 'c', n: 4 })
    await turn()
    expect(unsendable).toEqual([{ child: 'b', n: 2, bad: true }])
    // b's later message is held back: its record after the bad one would have a gap.
    expect(frames.flat().map((m) => m.n)).toEqual([1, 4])
  })

  it('after close, pushes are dropped and guarded code still runs', async () => {
    const { box, frames } = outbox()
    box.push({ child: 'a', n: 1 })
    const guarded = box.afterSent(() => 'ran')
    box.close()
    box.push({ child: 'a', n: 2 })
    expect(await guarded).toBe('ran')
    await turn()
    expect(frames).toEqual([])
  })
})
