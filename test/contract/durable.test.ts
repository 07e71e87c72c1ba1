/** Durable transcripts: every session reaches the store, outlives the registry, and resumes with its depth budget. */
import { copyFile, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createMemoryStore, createNdjsonStore, defineTool, SubagentDepthError, textResponse, toolCallResponse } from 'subagent-worker'
import { closeHosts, setup, signal, TRANSPORTS } from '../support/harness.js'

let dir: string
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sw-durable-'))
})
afterEach(async () => {
  await closeHosts()
  await rm(dir, { recursive: true, force: true })
})

describe.each(TRANSPORTS)('durable transcripts [%s]', (transport) => {
  it('a disposed child leaves host.agents but its transcript stays in the ndjson store', async () => {
    const store = createNdjsonStore(dir)
    const { host, parent } = setup(transport, [textResponse('kept')], { store })
    const run = await host.spawn.start({ prompt: 'remember me', parent, signal: signal() })
    await run.result
    const events = [...host.agents.get(run.id)!.session.events]
    await run.dispose()
    expect(host.agents.get(run.id)).toBeUndefined()
    const stored = await store.read(run.id)
    expect(stored!.header).toMatchObject({ id: run.id, parentSession: parent.id, origin: 'subagent', delegationDepth: 1 })
    expect(stored!.events).toEqual(events)
  })

  it('a resumed child session keeps its delegation budget and appends to the same transcript', async () => {
    const store = createNdjsonStore(dir)
    const { host, parent } = setup(transport, [textResponse('first life'), textResponse('second life')], { store })
    const run = await host.spawn.start({ prompt: 'hello', parent, signal: signal() })
    await run.result
    await run.dispose()
    const before = (await store.read(run.id))!.events.length

    const resumed = await host.resumeAgent(run.id, { provider: 'scripted' })
    expect(resumed.session.header.delegationDepth).toBe(1)
    // Runtime options never lower the persisted depth: a child of the resumed agent is at depth 2.
    await expect(host.spawn.start({ prompt: 'deeper', parent: resumed, signal: signal(), maxDepth: 1 })).rejects.toBeInstanceOf(SubagentDepthError)
    resumed.followup('again')
    await resumed.whenIdle()
    await host.close()
    const after = await store.read(run.id)
    expect(after!.events.length).toBeGreaterThan(before)
    expect(after!.events.map((e) => e.seq)).toEqual(after!.events.map((_, i) => i))
  })

  it('resuming an unknown or live session is a clear error', async () => {
    const { host, parent } = setup(transport, [])
    await expect(host.resumeAgent('nope')).rejects.toThrow('no session "nope" in the store')
    await expect(host.resumeAgent(parent.id)).rejects.toThrow(/already live/)
  })

  it('a resumed subagent session stays delegated: a tool that needs approval is still denied', async () => {
    const store = createNdjsonStore(dir)
    const { host, parent } = setup(transport, [textResponse('first'), toolCallResponse('a', 'approve_me', {}), textResponse('after')], { store })
    host.tools.register(defineTool({ name: 'approve_me', description: 'needs approval', parameters: { type: 'object' }, needsApproval: true, execute: () => 'ran' }))
    const run = await host.spawn.start({ prompt: 'hello', parent, signal: signal() })
    await run.result
    await run.dispose()
    const resumed = await host.resumeAgent(run.id, { provider: 'scripted' })
    resumed.followup('again')
    await resumed.whenIdle()
    const denied = resumed.session.events.filter((e) => e.type === 'tool/result').map((e) => e.data as { code?: string })
    expect(denied).toEqual([expect.objectContaining({ code: 'DENIED' })])
  })

  it('resumeAgent racing close() is refused, leaving nothing live', async () => {
    const store = createNdjsonStore(dir)
    const { host, parent } = setup(transport, [textResponse('x')], { store })
    const run = await host.spawn.start({ prompt: 'hi', parent, signal: signal() })
    await run.result
    await run.dispose()
    const resuming = host.resumeAgent(run.id, { provider: 'scripted' })
    const refused = expect(resuming).rejects.toThrow(/the host is closed/)
    await host.close()
    await refused
    expect(host.agents.get(run.id)).toBeUndefined()
  })

  it("a child's header records its type, model, label and which provider started it", async () => {
    const store = createNdjsonStore(dir)
    const { host, parent } = setup(transport, [textResponse('spawned'), textResponse('forked')], { store })
    const spawned = await host.spawn.run({ prompt: 'a', parent, label: 'researcher', agentOptions: { model: 'scripted-2' } })
    expect(spawned.stopReason).toBe('completed')
    const forked = await host.fork.run({ prompt: 'b', parent })
    expect(forked.stopReason).toBe('completed')
    const children = (await store.list({ parentSession: parent.id })).sessions
    expect(children.map(({ id: _id, createdAt: _at, ...rest }) => rest)).toEqual(
      expect.arrayContaining([
        { type: 'session', parentSession: parent.id, origin: 'subagent', delegationDepth: 1, provider: 'scripted', model: 'scripted-2', label: 'researcher', providerKind: 'spawn' },
        { type: 'session', parentSession: parent.id, origin: 'subagent', delegationDepth: 1, provider: 'scripted', model: 'scripted-1', providerKind: 'fork' },
      ]),
    )
    expect((await store.list({ label: 'researcher' })).sessions).toHaveLength(1)
    const parentHeader = (await store.read(parent.id))!.header
    expect(parentHeader).toMatchObject({ type: 'session', id: parent.id, provider: 'scripted', model: 'scripted-1' })
  })

  it('resumeAgent(id) alone brings an agent back with its model: its next turn just works', async () => {
    const store = createNdjsonStore(dir)
    const { host, parent } = setup(transport, [textResponse('before'), textResponse('after resuming')], { store })
    await parent.run('first')
    await parent.dispose()
    const resumed = await host.resumeAgent(parent.id)
    expect(resumed.options).toEqual({ provider: 'scripted', model: 'scripted-1' })
    expect(await resumed.run('second')).toMatchObject({ output: [{ type: 'text', text: 'after resuming' }], stopReason: 'completed' })
    await resumed.dispose() // its transcript is written through before it lets go
    const stored = await store.read(parent.id)
    expect(stored!.events.filter((e) => e.type === 'turn/end')).toHaveLength(2)
  })

  it('a live agent is resumed from the store once disposed, not before', async () => {
    const store = createNdjsonStore(dir)
    const { host, parent } = setup(transport, [textResponse('one'), textResponse('two')], { store })
    await parent.run('first')
    await expect(host.resumeAgent(parent.id)).rejects.toThrow(/already live on this host: dispose\(\) it first/)
    await parent.dispose()
    const resumed = await host.resumeAgent(parent.id)
    expect((await resumed.run('again')).stopReason).toBe('completed')
  })

  it('two hosts resuming one transcript: the second is refused at resumeAgent, until the first lets go', async () => {
    const { host, parent } = setup(transport, [textResponse('one')], { store: createNdjsonStore(dir) })
    const run = await host.spawn.start({ prompt: 'hello', parent })
    await run.result
    await run.dispose()
    const a = setup(transport, [], { store: createNdjsonStore(dir) }).host
    const b = setup(transport, [], { store: createNdjsonStore(dir) }).host
    const first = await a.resumeAgent(run.id)
    await expect(b.resumeAgent(run.id)).rejects.toThrow(new RegExp(`session "${run.id}" is being written by another store in this process: a transcript has one writer at a time`))
    await first.dispose()
    const second = await b.resumeAgent(run.id)
    expect(second.id).toBe(run.id)
  })

  it('a transcript copied under another name does not resume as the agent it holds', async () => {
    const store = createNdjsonStore(dir)
    const { host, parent } = setup(transport, [textResponse('one')], { store })
    const run = await host.spawn.start({ prompt: 'hello', parent })
    await run.result
    await run.dispose()
    await copyFile(join(dir, `${run.id}.jsonl`), join(dir, 'copy.jsonl'))
    await expect(host.resumeAgent('copy')).rejects.toThrow(new RegExp(`copy\\.jsonl holds session "${run.id}", not "copy"`))
    expect(host.agents.get(run.id)).toBeUndefined()
  })

  it('an id no store could hold is refused when the agent is created, before any turn', async () => {
    const { host } = setup(transport, [textResponse('never')], { store: createNdjsonStore(dir) })
    expect(() => host.createAgent({ id: '../../tmp/evil' })).toThrow('session id "../../tmp/evil" is not allowed: use 1 to 200 letters, digits, ".", "_" or "-"')
    await expect(host.resumeAgent('../evil')).rejects.toThrow(/is not allowed/)
  })

  it('a memory store told not to retain keeps only live sessions: no history, no growth with every run', async () => {
    const store = createMemoryStore({ retain: false })
    const { host, parent } = setup(transport, Array.from({ length: 50 }, () => textResponse('forgotten')), { store })
    for (let i = 0; i < 50; i++) expect((await host.spawn.run({ prompt: `run ${i}`, parent })).stopReason).toBe('completed')
    const live = await host.spawn.start({ prompt: 'still running', parent })
    expect((await store.list()).sessions.map((header) => header.id).sort()).toEqual([parent.id, live.id].sort())
    await live.dispose()
    await parent.dispose()
    expect((await store.list()).sessions).toEqual([])
    expect(() => createMemoryStore({ retain: 'no' as unknown as boolean })).toThrow('createMemoryStore retain must be true or false')
  })
})
