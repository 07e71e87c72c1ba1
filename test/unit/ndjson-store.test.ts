/** The durable store: one JSON line a record, torn last lines ignored, corruption reported. */
import { spawnSync } from 'node:child_process'
import { appendFile, copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createNdjsonStore, type SessionEvent } from 'subagent-worker'

let dir: string
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sw-store-'))
})
afterEach(async () => {
  await rm(dir, { recursive: true, force: true })
})

const header = { type: 'session' as const, id: 's1', createdAt: '2026-01-01T00:00:00.000Z', origin: 'subagent' as const, delegationDepth: 1 }
const event = (seq: number): SessionEvent => ({ seq, type: 'turn/start', data: {} })

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
    await expect(store.create({ ...header, id: '../escape' })).rejects.toThrow(/session id "..\/escape" is not allowed: use 1 to 200 letters, digits/)
    await store.create(header)
    await expect(store.create(header)).rejects.toThrow(/already exists/)
  })

  it('cuts a torn tail before appending to a transcript it did not create, so resuming never corrupts it', async () => {
    const first = createNdjsonStore(dir)
    await first.create(header)
    await first.append('s1', [event(0)])
    await appendFile(join(dir, 's1.jsonl'), '{"seq":1,"type":"tur')
    await first.release!('s1')
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

  it('delete forgets a session once released; deleting one that is not there is not an error', async () => {
    const store = createNdjsonStore(dir)
    await store.create(header)
    await store.release!('s1')
    await store.delete('s1')
    expect(await store.read('s1')).toBeUndefined()
    await expect(store.delete('s1')).resolves.toBeUndefined()
    await expect(store.delete('../escape')).rejects.toThrow(/session id "..\/escape" is not allowed: use 1 to 200 letters, digits/)
  })

  it('two large appends at once on one store never interleave inside a line', async () => {
    const store = createNdjsonStore(dir)
    await store.create(header)
    // Each line is larger than the pieces a file write is split into.
    const big = (seq: number, fill: string): SessionEvent => ({ seq, type: 'assistant/chunk', data: { chunk: { type: 'text-delta', text: fill.repeat(3 * 1024 * 1024) } } })
    await Promise.all([store.append('s1', [big(0, 'a')]), store.append('s1', [big(1, 'b')]), store.append('s1', [event(2)])])
    const read = await store.read('s1')
    expect(read!.events.map((e) => e.seq)).toEqual([0, 1, 2])
    expect(read!.events[1]).toEqual(big(1, 'b'))
  })

  it('a second live writer of a session is refused, naming it; after release it may write', async () => {
    const first = createNdjsonStore(dir)
    const second = createNdjsonStore(dir)
    await first.create(header)
    await expect(second.append('s1', [event(0)])).rejects.toThrow(/session "s1" is being written by another store in this process: a transcript has one writer at a time/)
    await expect(second.delete('s1')).rejects.toThrow(/is being written by another store/)
    await first.append('s1', [event(0)])
    await first.release!('s1')
    await second.append('s1', [event(1)])
    expect((await second.read('s1'))!.events).toEqual([event(0), event(1)])
  })

  it('a lock left by a writer that crashed is taken over: it cannot stay stuck', async () => {
    const store = createNdjsonStore(dir)
    await writeFile(join(dir, 's1.jsonl'), `${JSON.stringify(header)}\n`)
    const gone = spawnSync(process.execPath, ['-e', '0']).pid // a process that has exited
    await writeFile(join(dir, 's1.jsonl.lock'), JSON.stringify({ pid: gone, store: 'crashed' }))
    await store.append('s1', [event(0)])
    expect((await store.read('s1'))!.events).toEqual([event(0)])
    expect(JSON.parse(await readFile(join(dir, 's1.jsonl.lock'), 'utf8'))).toMatchObject({ pid: process.pid })
  })

  it('a torn tail in a file this store created (a partial write) is cut before the next append', async () => {
    const store = createNdjsonStore(dir)
    await store.create(header)
    await store.append('s1', [event(0)])
    await appendFile(join(dir, 's1.jsonl'), '{"seq":1,"type":"tur')
    await store.append('s1', [event(1)])
    expect((await store.read('s1'))!.events).toEqual([event(0), event(1)])
  })

  it('a transcript is read only under the id its header names: a copied file is refused and listed as unreadable', async () => {
    const store = createNdjsonStore(dir)
    await store.create(header)
    await copyFile(join(dir, 's1.jsonl'), join(dir, 'copy.jsonl'))
    await expect(store.read('copy')).rejects.toThrow(/copy\.jsonl holds session "s1", not "copy": the file was copied or renamed/)
    const { sessions, unreadable } = await store.list()
    expect(sessions.map((h) => h.id)).toEqual(['s1'])
    expect(unreadable).toEqual([{ id: 'copy', error: expect.stringMatching(/holds session "s1", not "copy"/) }])
  })

  it('a line that is JSON but not an event is reported, not passed on', async () => {
    const store = createNdjsonStore(dir)
    await writeFile(join(dir, 's1.jsonl'), `${JSON.stringify(header)}\nnull\n`)
    await expect(store.read('s1')).rejects.toThrow(/s1\.jsonl:2 is not a session event: the transcript is corrupt/)
  })
})
