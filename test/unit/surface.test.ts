/**
 * What a newcomer meets first on the public surface: a live session cannot be deleted from
 * under its agent, hosts and agents are `await using`-disposable, the ndjson store takes only an
 * absolute folder, and a bad prompt is refused naming `prompt`.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  createHost,
  createMemoryStore,
  createNdjsonStore,
  InvalidOptionError,
  ScriptedModel,
  SessionLiveError,
  textResponse,
  type Host,
  type SessionStore,
} from 'subagent-worker'

let dir: string
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sw-surface-'))
})
afterEach(() => rm(dir, { recursive: true, force: true }))

function scriptedHost(store: SessionStore, replies: string[]): Host {
  const host = createHost({ isolation: 'inline', store })
  host.models.register('scripted', new ScriptedModel(replies.map((text) => textResponse(text))))
  return host
}

describe.each([
  ['memory', () => createMemoryStore()],
  ['ndjson', () => createNdjsonStore(dir)],
] as const)('store.delete on a %s store', (_name, makeStore) => {
  it('refuses a live session with a SessionLiveError, and the host closes cleanly; once disposed it deletes', async () => {
    const store = makeStore()
    const first = scriptedHost(store, ['one'])
    const agent = first.createAgent({ options: { provider: 'scripted', model: 'm' } })
    await agent.run('Hello')
    await agent.dispose()

    const host = scriptedHost(store, ['two'])
    const resumed = await host.resumeAgent(agent.id)
    await resumed.run('Where were we?')
    const refused = await store.delete(agent.id).catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(SessionLiveError)
    expect(refused).toMatchObject({
      code: 'ERR_SUBAGENT_SESSION_LIVE',
      sessionId: agent.id,
      message: `session "${agent.id}" is live: dispose() its agent (or close its host) before deleting its transcript`,
    })
    expect((await store.read(agent.id))?.events.length).toBeGreaterThan(0)

    await resumed.dispose()
    await store.delete(agent.id)
    expect(await store.read(agent.id)).toBeUndefined()
    await expect(host.close()).resolves.toBeUndefined()
    await first.close()
  })
})

describe('await using', () => {
  it('closes a host and disposes an agent when the block is left', async () => {
    const store = createMemoryStore()
    let host: Host
    let id: string
    {
      await using scoped = scriptedHost(store, ['hi'])
      host = scoped
      await using agent = scoped.createAgent({ options: { provider: 'scripted', model: 'm' } })
      id = agent.id
      await agent.run('Hello')
    }
    expect(host.agents.get(id)).toBeUndefined()
    expect(() => host.createAgent()).toThrow('the host is closed')
    // Released as dispose() releases it: the transcript may go now.
    await store.delete(id)
  })
})

describe('createNdjsonStore', () => {
  it('refuses a relative folder, as every other path option does', () => {
    expect(() => createNdjsonStore('rel/dir')).toThrow(InvalidOptionError)
    expect(() => createNdjsonStore('rel/dir')).toThrow(
      'createNdjsonStore dir must be an absolute path (path.resolve(dir) if it is meant from the working directory), not "rel/dir"',
    )
  })
})

describe('a start request prompt', () => {
  it.each([42, null, [{ type: 'image' }], { text: 'hi' }])('%j is refused naming prompt', async (prompt) => {
    const host = scriptedHost(createMemoryStore(), [])
    const parent = host.createAgent({ options: { provider: 'scripted', model: 'm' } })
    const refused = await host.spawn.start({ prompt: prompt as never, parent }).catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(InvalidOptionError)
    expect((refused as Error).message).toMatch(/^prompt must be a string or an array of content blocks \(\{ type: "text", text \} or \{ type: "tool-call", id, name, arguments \}\), not /)
    await host.close()
  })
})
