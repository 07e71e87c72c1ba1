/**
 * A model's stream as the loop reads it (untilAbort): every chunk passed on in order, the wait cut
 * the moment the signal aborts even when the model ignores it, the model's stream told to return
 * whenever it is left early, and nothing held per chunk while a long stream runs.
 */
import { getEventListeners } from 'node:events'
import { describe, expect, it } from 'vitest'
import { heapAfterCollection } from '../support/heap.js'
import { untilAbort } from '../../dist/agent/models/until-abort.js'
import type { StreamChunk } from 'subagent-worker'

const text = (t: string): StreamChunk => ({ type: 'text-delta', text: t })

/** A stream that yields `chunks`, then waits forever, ignoring any signal; says when it was told to return. */
function stubborn(chunks: StreamChunk[]) {
  const state = { returned: false, waiting: false }
  const iterator: AsyncIterator<StreamChunk> = {
    next: () => {
      const chunk = chunks.shift()
      if (chunk) return Promise.resolve({ done: false, value: chunk })
      state.waiting = true
      return new Promise(() => {})
    },
    return: () => {
      state.returned = true
      return Promise.resolve({ done: true, value: undefined })
    },
  }
  return { state, stream: { [Symbol.asyncIterator]: () => iterator } }
}

describe('untilAbort', () => {
  it('passes every chunk on in order and ends with the stream, without telling a finished stream to return', async () => {
    const chunks = [text('a'), text('b')]
    let returned = false
    const iterator: AsyncIterator<StreamChunk> = {
      next: () => Promise.resolve(chunks.length > 0 ? { done: false, value: chunks.shift()! } : { done: true, value: undefined }),
      return: () => ((returned = true), Promise.resolve({ done: true, value: undefined })),
    }
    const signal = new AbortController().signal
    const seen: StreamChunk[] = []
    for await (const chunk of untilAbort({ [Symbol.asyncIterator]: () => iterator }, signal)) seen.push(chunk)
    expect(seen).toEqual([text('a'), text('b')])
    expect(returned).toBe(false)
    expect(getEventListeners(signal, 'abort')).toEqual([])
  })

  it('an abort ends the wait on a model that ignores it, with the abort reason, and the model is told to return', async () => {
    const { state, stream } = stubborn([text('partial')])
    const controller = new AbortController()
    const seen: string[] = []
    const reading = (async () => {
      for await (const chunk of untilAbort(stream, controller.signal)) {
        if (chunk.type === 'text-delta') seen.push(chunk.text)
      }
    })()
    await until(() => state.waiting)
    controller.abort({ kind: 'parent' })
    await expect(reading).rejects.toEqual({ kind: 'parent' })
    expect(seen).toEqual(['partial'])
    expect(state.returned).toBe(true)
  })

  it('a signal aborted before the first pull stops at once, with its reason', async () => {
    const { state, stream } = stubborn([text('never read')])
    const iterator = untilAbort(stream, AbortSignal.abort('already'))
    await expect(iterator.next()).rejects.toBe('already')
    expect(state.returned).toBe(true)
  })

  it('a reader that leaves early (a break) tells the model to return and drops its listener', async () => {
    const { state, stream } = stubborn([text('a'), text('b')])
    const signal = new AbortController().signal
    for await (const chunk of untilAbort(stream, signal)) {
      expect(chunk).toEqual(text('a'))
      break
    }
    expect(state.returned).toBe(true)
    expect(getEventListeners(signal, 'abort')).toEqual([])
  })

  it('a model stream that throws ends the read with its error', async () => {
    const failing = { [Symbol.asyncIterator]: async function* () { yield text('a'); throw new Error('the model broke') } }
    const seen: StreamChunk[] = []
    await expect((async () => { for await (const chunk of untilAbort(failing, new AbortController().signal)) seen.push(chunk) })()).rejects.toThrow('the model broke')
    expect(seen).toEqual([text('a')])
  })

  it('a stream that gives something other than an iterator result ends the read with a TypeError naming it; the model is told to return', async () => {
    for (const bad of [null, 7, 'text']) {
      let returned = false
      const iterator = {
        next: () => Promise.resolve(bad),
        return: () => ((returned = true), Promise.resolve({ done: true, value: undefined })),
      } as unknown as AsyncIterator<StreamChunk>
      const signal = new AbortController().signal
      const reader = untilAbort({ [Symbol.asyncIterator]: () => iterator }, signal)
      await expect(reader.next()).rejects.toThrow(TypeError)
      expect(returned).toBe(true)
      expect(getEventListeners(signal, 'abort')).toEqual([])
    }
  })

  it('a model whose return throws at once still lets an abort end the read, with the abort reason', async () => {
    const iterator: AsyncIterator<StreamChunk> = {
      next: () => new Promise(() => {}),
      return: () => {
        throw new Error('the model broke on return')
      },
    }
    const controller = new AbortController()
    const pull = untilAbort({ [Symbol.asyncIterator]: () => iterator }, controller.signal).next()
    controller.abort('stop')
    await expect(pull).rejects.toBe('stop')
  })

  it('holds nothing per chunk while a long stream runs: the heap at its last chunk is about the heap at its first', async () => {
    const chunks = 200_000
    const heap: number[] = []
    const long = {
      [Symbol.asyncIterator]: async function* () {
        for (let i = 0; i < chunks; i++) {
          if (i === 1 || i === chunks - 1) heap.push(heapAfterCollection())
          yield text('x')
        }
      },
    }
    let read = 0
    for await (const _ of untilAbort(long, new AbortController().signal)) read++
    expect(read).toBe(chunks)
    // A Promise.race with the abort per chunk held about 400 bytes a chunk here: 80 MB.
    expect(heap[1]! - heap[0]!).toBeLessThan(10 * 1024 * 1024)
  })
})

/** Resolves once `condition` holds, checked each macrotask. */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setImmediate(resolve))
}
