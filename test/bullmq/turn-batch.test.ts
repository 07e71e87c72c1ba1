/**
 * The turn batch behind the BullMQ transport's job adds and claim checks: the calls of one turn
 * reach Redis as one batch, each answered with its own reply, and a batch that fails fails its
 * calls only.
 */
import { describe, expect, it } from 'vitest'
import { TurnBatch } from '../../dist/bullmq/turn-batch.js'

/** A batch whose send records each batch it was given and answers each item doubled. */
function doubling() {
  const batches: number[][] = []
  const batch = new TurnBatch<number, number>(async (items) => {
    batches.push(items)
    return items.map((item) => item * 2)
  })
  return { batch, batches }
}

describe('TurnBatch', () => {
  it('sends the calls of one turn together, those made in the promise jobs it started included, and answers each in order', async () => {
    const { batch, batches } = doubling()
    const first = [batch.call(1), batch.call(2)]
    const later = Promise.resolve().then(() => batch.call(3))
    expect(await Promise.all([...first, later])).toEqual([2, 4, 6])
    expect(batches).toEqual([[1, 2, 3]])
  })

  it('sends a call made after its batch went out in a batch of its own', async () => {
    const { batch, batches } = doubling()
    await batch.call(1)
    expect(await batch.call(2)).toBe(4)
    expect(batches).toEqual([[1], [2]])
  })

  it('fails every call of a batch whose send fails, and only those', async () => {
    let fail = true
    const batch = new TurnBatch<number, number>(async (items) => {
      if (fail) throw new Error('Redis said no')
      return items
    })
    const failed = [batch.call(1), batch.call(2)].map((call) => call.then(() => 'answered', (error: Error) => error.message))
    expect(await Promise.all(failed)).toEqual(['Redis said no', 'Redis said no'])
    fail = false
    expect(await batch.call(3)).toBe(3)
  })
})
