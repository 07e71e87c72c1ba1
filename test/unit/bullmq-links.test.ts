/**
 * The two ends of a host↔node link, driven by hand (no Redis): the node's version check of the
 * host's welcome, its distrust of a malformed frame, its take of a child and the host's answers
 * (the create, a refusal, a drop before the child is on a thread), and the host's distrust of a
 * node that speaks of a child it was not given.
 */
import { describe, expect, it } from 'vitest'
import { HostLink, type NodeMessage } from '../../dist/remote/host-link.js'
import { NodeLink } from '../../dist/remote/node-link.js'
import type { TakeMessage } from '../../dist/remote/envelope.js'
import { SilenceJudge } from '../../dist/parent/runners/liveness.js'
import { PROTOCOL_VERSION, type HostMessage } from '../../dist/protocol/messages.js'

const turn = () => new Promise((resolve) => setImmediate(resolve))

function hostLink() {
  const sent: NodeMessage[] = []
  let ended = false
  const link = new HostLink({ host: 'h1', label: 'node n1', judge: new SilenceJudge({ limitMs: 5000, intervalMs: 500 }), send: (frame) => void sent.push(...frame), ended: () => void (ended = true) })
  return { link, sent, ended: () => ended }
}

describe("a node's link to a host", () => {
  it('says hello in its version, and takes the config from a welcome in the same version', async () => {
    const { link, sent } = hostLink()
    await turn()
    expect(sent).toEqual([{ type: 'hello', v: PROTOCOL_VERSION }])
    link.receive([{ type: 'welcome', v: PROTOCOL_VERSION, config: { maxParallelToolCalls: 3, abortGraceMs: 50 } }])
    await expect(link.welcome).resolves.toEqual({ maxParallelToolCalls: 3, abortGraceMs: 50 })
  })

  it('refuses a host of another protocol version: says why, and the link ends', async () => {
    const { link, sent, ended } = hostLink()
    link.receive([{ type: 'welcome', v: PROTOCOL_VERSION + 1, config: { maxParallelToolCalls: 3 } }])
    await expect(link.welcome).rejects.toThrow(`the host speaks frame protocol v${PROTOCOL_VERSION + 1} but node n1 speaks v${PROTOCOL_VERSION}`)
    expect(sent.at(-1)).toMatchObject({ type: 'fatal', error: { message: `the host speaks frame protocol v${PROTOCOL_VERSION + 1} but node n1 speaks v${PROTOCOL_VERSION}: both must come from the same version of subagent-worker` } })
    expect(ended()).toBe(true)
    expect(link.signal.aborted).toBe(true)
  })

  it('a malformed frame from the host ends the link, naming what was wrong', async () => {
    const { link, sent, ended } = hostLink()
    link.receive([{ type: 'publish', child: 7 }])
    expect(sent.at(-1)).toMatchObject({ type: 'fatal', error: { message: expect.stringContaining('the host sent a malformed frame') } })
    expect(ended()).toBe(true)
  })

  const create = (child: string) => ({ type: 'create', child, spec: { id: child, header: { id: child, createdAt: 'now' }, options: {}, seed: [], descriptor: { mode: 'one-shot', provider: 'spawn' } }, hostModels: [], hostTools: [] }) as const
  const welcome = { type: 'welcome', v: PROTOCOL_VERSION, config: { maxParallelToolCalls: 3 } } as const

  it('asks for the child a job names with the job\'s lock token, and takes what the host gives', async () => {
    const { link, sent } = hostLink()
    const taken = link.take('c', 'lock-token')
    await turn()
    expect(sent).toEqual([{ type: 'hello', v: PROTOCOL_VERSION }, { type: 'take', child: 'c', token: 'lock-token' }])
    link.receive([welcome, create('c')])
    expect(await taken).toMatchObject({ create: create('c') })
  })

  it('a drop answering a take is a refusal: nothing is built, nothing said', async () => {
    const { link, sent } = hostLink()
    const taken = link.take('c', 'lock-token')
    link.receive([welcome, { type: 'drop', child: 'c' }])
    expect(await taken).toBeUndefined()
    await turn()
    expect(sent.map((message) => message.type)).toEqual(['hello', 'take'])
  })

  it('a drop after the create, before the child is on a thread: the placement stops and the host hears dropped', async () => {
    const { link, sent } = hostLink()
    const taken = link.take('c', 'lock-token')
    link.receive([welcome, create('c')])
    const { signal } = (await taken)!
    link.receive([{ type: 'drop', child: 'c' }])
    expect(signal.aborted).toBe(true)
    await turn()
    expect(sent.at(-1)).toEqual({ type: 'dropped', child: 'c' })
  })

  it('a create the node did not ask for is refused: the host is broken, and the link ends', async () => {
    const { link, sent, ended } = hostLink()
    link.receive([welcome])
    link.receive([create('c')])
    expect(sent.at(-1)).toMatchObject({ type: 'fatal', error: { message: 'the host sent a create message for child c, which node n1 did not ask for' } })
    expect(ended()).toBe(true)
  })

  it('a link that ends answers its open takes with nothing', async () => {
    const { link } = hostLink()
    const taken = link.take('c', 'lock-token')
    link.close('the host was silent')
    expect(await taken).toBeUndefined()
  })

  it('bye ends the link: the host is done with it', () => {
    const { link, ended } = hostLink()
    link.receive([{ type: 'bye' }])
    expect(ended()).toBe(true)
  })
})

describe("a host's link to a node", () => {
  function nodeLink() {
    const sent: HostMessage[] = []
    const takes: TakeMessage[] = []
    let ended = false
    const link = new NodeLink({ node: 'n1', config: { maxParallelToolCalls: 8 }, send: (frame) => void sent.push(...frame), take: (take) => void takes.push(take), ended: () => void (ended = true) })
    return { link, sent, takes, ended: () => ended }
  }

  it('a take goes to the transport, after the hello beside it opened the channel', () => {
    const { link, takes, ended } = nodeLink()
    link.receive([{ type: 'hello', v: PROTOCOL_VERSION }, { type: 'take', child: 'c', token: 't' }])
    expect(takes).toEqual([{ type: 'take', child: 'c', token: 't' }])
    expect(ended()).toBe(false)
  })

  it('a refused take is answered with a drop', async () => {
    const { link, sent } = nodeLink()
    link.refuse('c')
    await turn()
    expect(sent).toContainEqual({ type: 'drop', child: 'c' })
  })

  it('a message about a child not given to the node is a violation: the node is given up on', () => {
    const { link, sent, ended } = nodeLink()
    link.receive([{ type: 'hello', v: PROTOCOL_VERSION }, { type: 'created', child: 'stranger' }])
    expect(ended()).toBe(true)
    expect(sent).toContainEqual({ type: 'bye' })
  })
})
