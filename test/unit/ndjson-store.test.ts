/** The durable store: one JSON line a record, torn last lines ignored, corruption reported. */
import { appendFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createNdjsonStore } from 'subagent-worker'

let dir: string
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sw-store-'))
})
afterEach(async () => {
  await rm(dir, { recursive: true, force: true })
})

const header = { type: 'session' as const, id: 's1', createdAt: '2026-01-01T00:00:00.000Z', origin: 'subagent' as const, delegationDepth: 1 }
const event = (seq: number) => ({ seq, type: 'turn/start', data: {} })

describe('createNdjsonStore', () => {
  it('writes the header line, then one event a line, and reads them back', async () => {
    const store = createNdjsonStore(join(dir, 'nested', 'sessions'))
    await store.create(header)
    await store.append('s1', [event(0), event(1)])
    await store.append('s1', [event(2)])
    const text = await readFile(join(dir, 'nested', 'sessions', 's1.jsonl'), 'utf8')
    expect(text.split('\n')).toEqual([JSON.stringify(header), ...[0, 1, 2].map((n) => JSON.stringify(event(n))), ''])
    expect(await store.read('s1')).toEqual({ header, events: [event(0), event(1), event(2)] })
    expect(await store.list()).toEqual({ sessions: [header], unreadable: [] })
    expect(await store.read('missing')).toBeUndefined()
  })

  it('ignores a torn last line: never fatal', async () => {
    const store = createNdjsonStore(dir)
    await store.create(header)
    await store.append('s1', [event(0)])
    await appendFile(join(dir, 's1.jsonl'), '{"seq":1,"type":"tur')
    expect(await store.read('s1')).toEqual({ header, events: [event(0)] })
    await writeFile(join(dir, 'torn.jsonl'), '{"id":"torn","crea')
    expect(await store.read('torn')).toBeUndefined()
    expect(await store.list()).toEqual({ sessions: [header], unreadable: [] })
  })

  it('reports a corrupt line in the middle instead of dropping it silently', async () => {
    const store = createNdjsonStore(dir)
    await writeFile(join(dir, 'bad.jsonl'), `${JSON.stringify({ ...header, id: 'bad' })}\nnot json\n${JSON.stringify(event(1))}\n`)
    await expect(store.read('bad')).rejects.toThrow(/bad\.jsonl:2 is not valid JSON/)
  })

  it('refuses ids that cannot safely name a file, and duplicate sessions', async () => {
    const store = createNdjsonStore(dir)
    await expect(store.create({ ...header, id: '../escape' })).rejects.toThrow(/cannot name a file/)
    await store.create(header)
    await expect(store.create(header)).rejects.toThrow(/already exists/)
  })

  it('cuts a torn tail before appending to a transcript it did not create, so resuming never corrupts it', async () => {
    const first = createNdjsonStore(dir)
    await first.create(header)
    await first.append('s1', [event(0)])
    await appendFile(join(dir, 's1.jsonl'), '{"seq":1,"type":"tur')
    const resumed = createNdjsonStore(dir)
    await resumed.append('s1', [event(1)])
    expect(await resumed.read('s1')).toEqual({ header, events: [event(0), event(1)] })
  })

  it('a header written before it had a type still reads, with the type filled in', async () => {
    const { type: _, ...old } = header
    await writeFile(join(dir, 's1.jsonl'), `${JSON.stringify(old)}\n${JSON.stringify(event(0))}\n`)
    const store = createNdjsonStore(dir)
    expect(await store.read('s1')).toEqual({ header, events: [event(0)] })
    expect((await store.list()).sessions).toEqual([header])
  })

  it('lists what it can read, reports each unreadable transcript apart with why, and filters by label and parent', async () => {
    const store = createNdjsonStore(dir)
    await store.create({ ...header, id: 'a', label: 'research', parentSession: 'p1' })
    await store.create({ ...header, id: 'b', label: 'review', parentSession: 'p1' })
    await store.create({ ...header, id: 'c', label: 'research', parentSession: 'p2' })
    await writeFile(join(dir, 'corrupt.jsonl'), 'not json at all\n')
    await writeFile(join(dir, 'nothead.jsonl'), '[1,2,3]\n')
    const all = await store.list()
    expect(all.sessions.map((h) => h.id)).toEqual(['a', 'b', 'c'])
    expect(all.unreadable).toEqual([
      { id: 'corrupt', error: expect.stringMatching(/corrupt\.jsonl:1 is not valid JSON/) },
      { id: 'nothead', error: expect.stringMatching(/nothead\.jsonl:1 is not a session header/) },
    ])
    expect((await store.list({ label: 'research' })).sessions.map((h) => h.id)).toEqual(['a', 'c'])
    expect((await store.list({ parentSession: 'p1' })).sessions.map((h) => h.id)).toEqual(['a', 'b'])
    expect((await store.list({ label: 'research', parentSession: 'p2' })).sessions.map((h) => h.id)).toEqual(['c'])
  })

  it('delete forgets a session; deleting one that is not there is not an error', async () => {
    const store = createNdjsonStore(dir)
    await store.create(header)
    await store.delete('s1')
    expect(await store.read('s1')).toBeUndefined()
    await expect(store.delete('s1')).resolves.toBeUndefined()
    await expect(store.delete('../escape')).rejects.toThrow(/cannot name a file/)
  })
})
