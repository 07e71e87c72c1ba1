/** A new session id: a random UUID held as one flat string (src/parent/driver/stores/store.ts). */
import { describe, expect, it } from 'vitest'
import { heapAfterCollection } from '../support/heap.js'
import { newSessionId } from '../../dist/parent/driver/stores/store.js'

describe('new session ids', () => {
  it('are distinct random UUIDs (version 4)', () => {
    const ids = Array.from({ length: 1000 }, newSessionId)
    expect(new Set(ids).size).toBe(ids.length)
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
  })

  it('hold about what 36 characters take, not the rope randomUUID builds (about 490 bytes each)', () => {
    const ids: string[] = []
    const before = heapAfterCollection()
    for (let i = 0; i < 20_000; i++) ids.push(newSessionId())
    const perId = (heapAfterCollection() - before) / ids.length
    expect(ids).toHaveLength(20_000) // held until here
    expect(perId).toBeLessThan(200)
  })
})
