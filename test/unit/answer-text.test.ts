/**
 * A streamed answer is recorded as one flat string (src/agent/loop.ts): its chunks joined once,
 * not appended one by one, which would keep the answer as a rope of every chunk for as long as
 * its transcript lives.
 */
import { describe, expect, it } from 'vitest'
import { heapAfterCollection } from '../support/heap.js'
import { createHost, createMemoryStore, type Model, type StreamChunk } from '../../dist/index.js'

const CHUNKS = 2000
const oneCharacterAtATime: Model = {
  async *stream(): AsyncGenerator<StreamChunk> {
    for (let i = 0; i < CHUNKS; i++) yield { type: 'text-delta', text: String.fromCharCode(97 + (i % 26)) }
    yield { type: 'finish', reason: 'stop' }
  },
}

describe("a streamed answer's text", () => {
  it('is whole in the transcript, and holds about what its characters take, not a node per chunk', async () => {
    // The store drops each transcript once its child is disposed: only `answers` holds the texts then.
    const store = createMemoryStore({ retain: false })
    const host = createHost({ isolation: 'inline', store })
    host.models.register('chars', oneCharacterAtATime)
    const parent = host.createAgent({ options: { provider: 'chars' } })
    const answers: string[] = []
    for (let i = 0; i < 20; i++) {
      const run = await host.spawn.start({ prompt: 'spell', parent })
      expect((await run.result).stopReason).toBe('completed')
      const message = (await store.read(run.id))!.events.find((event) => event.type === 'assistant/message')
      const block = message?.type === 'assistant/message' ? message.data.content[0] : undefined
      answers.push(block?.type === 'text' ? block.text : '')
      await run.dispose()
    }
    await host.close()
    expect(answers.every((text) => text.length === CHUNKS)).toBe(true)
    await new Promise((resolve) => setImmediate(resolve)) // what the close left to do is done
    const held = heapAfterCollection()
    const perAnswer = (held - (answers.splice(0), heapAfterCollection())) / 20
    expect(perAnswer).toBeLessThan(8 * CHUNKS) // flat: about 1 byte a character; a rope: about 30
  })
})
