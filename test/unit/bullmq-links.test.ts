/**
 * The two ends of a host↔node link, driven by hand (no Redis): the node's version check of the
 * host's welcome, its distrust of a malformed frame, its take of a child and the host's answers
 * (the create, a refusal, a drop before the child is on a thread), a child the host places
 * directly, the node's room as it tells it and as the host counts it, and the host's distrust of
 * a node that speaks of a child it was not given or of room past belief.
 */
import { getEventListeners } from 'node:events'
import { serialize } from 'node:v8'
import { describe, expect, it } from 'vitest'
import { HostLink, type NodeMessage, type TakeAnswer, type Taken } from '../../dist/remote/host-link.js'
import { NodeLink } from '../../dist/remote/node-link.js'
import { decode, encode, type TakeMessage } from '../../dist/remote/envelope.js'
import { SilenceJudge } from '../../dist/parent/runners/liveness.js'
import { PROTOCOL_VERSION, type HostMessage } from '../../dist/protocol/messages.js'

const turn = () => new Promise((resolve) => setImmediate(resolve))

/** The child a take was given; fails the test on a refusal or no answer. */
function given(answer: TakeAnswer): Taken {
  if (typeof answer === 'string') throw new Error(`the take was ${answer}`)
  return answer
}

function hostLink() {
  const sent: NodeMessage[][] = []
  const placed: Array<{ taken: Taken; level: number }> = []
  let ended = false
  const link = new HostLink({
    id: 'link-1',
    host: 'h1',
    label: 'node n1',
    judge: new SilenceJudge({ limitMs: 5000, intervalMs: 500 }),
    send: (frame) => void sent.push(frame),
    levelOf: (depth) => Math.min(depth ?? 1, 4),
    placed: (taken, level) => void placed.push({ taken, level }),
    ended: () => void (ended = true),
  })
  return { link, sent: { at: (i: number) => sent.flat().at(i), map: <T>(f: (m: NodeMessage) => T) => sent.flat().map(f) }, frames: sent, placed, ended: () => ended }
}

describe("a node's link to a host", () => {
  it('says hello in its version, and takes the config from a welcome in the same version', async () => {
    const { link, frames } = hostLink()
    await turn()
    expect(frames).toEqual([[{ type: 'hello', v: PROTOCOL_VERSION }]])
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

  it("sends the host its children's text-only events side by side in one 'texts', each child's messages in their order", async () => {
    const { link, frames } = hostLink()
    await turn()
    const created = { type: 'created', child: 'b' } as const
    const event = { seq: 3, type: 'turn/end', data: { reason: { kind: 'completed' } } } as const
    link.send({ type: 'events', child: 'a', events: ['one', 'two'] })
    link.send(created)
    link.send({ type: 'events', child: 'b', events: ['uno'] })
    link.send({ type: 'events', child: 'a', events: ['three', event] })
    link.send({ type: 'events', child: 'a', events: ['four'] })
    link.send({ type: 'events', child: 'c', events: ['eins'] })
    await turn()
    // b's text comes after its created: the list sits at a's first place, before it, so b's stays apart; so do a's after its mixed message.
    expect(frames.at(-1)).toEqual([
      { type: 'texts', texts: ['a', 'one', 'a', 'two', 'c', 'eins'] },
      created,
      { type: 'events', child: 'b', events: ['uno'] },
      { type: 'events', child: 'a', events: ['three', event] },
      { type: 'events', child: 'a', events: ['four'] },
    ])
  })

  const create = (child: string, delegationDepth = 1) => ({ type: 'create', child, spec: { id: child, header: { id: child, createdAt: 'now', delegationDepth }, options: {}, seed: [], descriptor: { mode: 'one-shot', provider: 'spawn' } }, hostModels: [], hostTools: [] }) as const
  const welcome = { type: 'welcome', v: PROTOCOL_VERSION, config: { maxParallelToolCalls: 3 } } as const

  it('asks for the child a job names with the job\'s lock token, and takes what the host gives', async () => {
    const { link, frames } = hostLink()
    const taken = link.take('c', 'lock-token')
    await turn()
    expect(frames).toEqual([[{ type: 'hello', v: PROTOCOL_VERSION }, { type: 'take', child: 'c', token: 'lock-token' }]])
    link.receive([welcome, create('c')])
    expect(await taken).toMatchObject({ create: create('c') })
  })

  it('a drop answering a take is a refusal: nothing is built, nothing said', async () => {
    const { link, sent } = hostLink()
    const taken = link.take('c', 'lock-token')
    link.receive([welcome, { type: 'drop', child: 'c' }])
    expect(await taken).toBe('refused')
    await turn()
    expect(sent.map((message) => message.type)).toEqual(['hello', 'take'])
  })

  it('a drop after the create, before the child is on a thread: the placement stops and the host hears dropped', async () => {
    const { link, sent } = hostLink()
    const taken = link.take('c', 'lock-token')
    link.receive([welcome, create('c')])
    const { signal } = given(await taken)
    link.receive([{ type: 'drop', child: 'c' }])
    expect(signal.aborted).toBe(true)
    await turn()
    expect(sent.at(-1)).toEqual({ type: 'dropped', child: 'c' })
  })

  it('a create no take asked for is a direct placement: the node is asked to build it at its depth level, and counts it', async () => {
    const { link, placed, frames } = hostLink()
    link.receive([welcome, create('c', 6)])
    expect(placed).toHaveLength(1)
    expect(placed[0]).toMatchObject({ level: 4, taken: { create: create('c', 6) } })
    expect(placed[0]!.taken.signal.aborted).toBe(false)
    await turn()
    frames.length = 0
    link.room(4, 2)
    await turn()
    // The word carries the placement it counted, so the host can subtract the ones still on their way.
    expect(frames).toEqual([[{ type: 'room', level: 4, free: 2, placed: 1 }]])
  })

  it('a drop for a child placed directly, before it is on a thread: its placement stops and the host hears dropped', async () => {
    const { link, placed, sent } = hostLink()
    link.receive([welcome, create('c')])
    link.receive([{ type: 'drop', child: 'c' }])
    expect(placed[0]!.taken.signal.aborted).toBe(true)
    await turn()
    expect(sent.at(-1)).toEqual({ type: 'dropped', child: 'c' })
  })

  it('a second create for a child asked for is a broken host: the link ends', async () => {
    const { link, sent, ended } = hostLink()
    void link.take('c', 'lock-token')
    link.receive([welcome, create('c')])
    link.receive([create('c')])
    expect(sent.at(-1)).toMatchObject({ type: 'fatal', error: { message: 'the host sent a second create message for child c' } })
    expect(ended()).toBe(true)
  })

  it('a child placed directly and refused for want of room is said so, and may be placed again', async () => {
    const { link, placed, sent } = hostLink()
    link.receive([welcome, create('c')])
    link.createFailed('c', Object.assign(new Error('no room'), { code: 'ERR_SUBAGENT_NODE_FULL' }))
    await turn()
    expect(sent.at(-1)).toMatchObject({ type: 'create-failed', child: 'c', error: { message: 'no room', code: 'ERR_SUBAGENT_NODE_FULL' } })
    link.receive([create('c')])
    expect(placed).toHaveLength(2)
  })

  it('more room is said at the end of the turn; less rides the next frame sent anyway; a word that changes nothing is not said', async () => {
    const { link, frames } = hostLink()
    await turn()
    frames.length = 0
    link.room(1, 3)
    link.room(1, 2) // the latest word a level goes
    await turn()
    expect(frames).toEqual([[{ type: 'room', level: 1, free: 2, placed: 0 }]])
    link.room(1, 1)
    await turn()
    expect(frames).toHaveLength(1) // less room is no news to the host that placed the child
    link.send({ type: 'created', child: 'x' })
    await turn()
    expect(frames[1]).toEqual([{ type: 'created', child: 'x' }, { type: 'room', level: 1, free: 1, placed: 0 }])
    link.room(1, 2)
    link.room(1, 1) // back where the host was told: nothing to say
    await turn()
    expect(frames).toHaveLength(2)
    link.sayRoomNow()
    link.room(1, 0)
    await turn()
    expect(frames[2]).toEqual([{ type: 'room', level: 1, free: 0, placed: 0 }])
  })

  it('a link that ends answers its open takes unanswered, as it does a take asked of it after; a child asked for twice is refused', async () => {
    const { link } = hostLink()
    const taken = link.take('c', 'lock-token')
    expect(await link.take('c', 'another-token')).toBe('refused')
    link.close('the host was silent')
    expect(await taken).toBe('unanswered')
    expect(await link.take('d', 'lock-token')).toBe('unanswered')
  })

  it("a link that ends stops every child given and not yet on a thread, with the link's reason", async () => {
    const { link, placed } = hostLink()
    const taking = link.take('t', 'lock-token')
    link.receive([welcome, create('t'), create('p')])
    const taken = given(await taking)
    link.close('the host was silent')
    for (const { signal } of [taken, placed[0]!.taken]) {
      expect(signal.aborted).toBe(true)
      expect(signal.reason).toBe(link.signal.reason)
    }
    expect(link.signal.reason).toMatchObject({ code: 'ERR_SUBAGENT_LINK_ENDED', message: 'the link to host h1 ended: the host was silent' })
  })

  it("children given the node leave nothing on the link's own signal, which lives as long as the link", async () => {
    // A signal made with AbortSignal.any of the link's stays in the link's set of dependants
    // (never freed on Node 20): the probe checks this Node keeps that set where it is read.
    const dependants = (signal: AbortSignal) => {
      const key = Object.getOwnPropertySymbols(signal).find((symbol) => symbol.description === 'kDependantSignals')
      return key === undefined ? 0 : (signal as unknown as Record<symbol, Set<unknown>>)[key]!.size
    }
    const probe = new AbortController()
    // Listened to, so that a Node which follows sources lazily follows this one at once.
    AbortSignal.any([probe.signal]).addEventListener('abort', () => {})
    expect(dependants(probe.signal)).toBe(1)
    const { link, placed } = hostLink()
    const takes = Array.from({ length: 20 }, (_, i) => link.take(`t${i}`, 'lock-token'))
    link.receive([welcome, ...Array.from({ length: 20 }, (_, i) => create(`t${i}`)), ...Array.from({ length: 20 }, (_, i) => create(`p${i}`))])
    expect((await Promise.all(takes)).every((taken) => typeof taken === 'object')).toBe(true)
    expect(placed).toHaveLength(20)
    expect(dependants(link.signal)).toBe(0)
    expect(getEventListeners(link.signal, 'abort')).toHaveLength(0)
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
    const hello = { type: 'hello', v: PROTOCOL_VERSION } as const
    const link = new NodeLink({ id: 'link-1', node: 'n1', config: { maxParallelToolCalls: 8 }, send: (frame) => void sent.push(...frame), take: (take) => void takes.push(take), ended: () => void (ended = true) })
    link.receive([hello])
    return { link, sent, takes, ended: () => ended }
  }

  it('a take goes to the transport, after the hello beside it opened the channel', () => {
    const sent: HostMessage[] = []
    const takes: TakeMessage[] = []
    let over = false
    const link = new NodeLink({ id: 'link-1', node: 'n1', config: { maxParallelToolCalls: 8 }, send: (frame) => void sent.push(...frame), take: (take) => void takes.push(take), ended: () => void (over = true) })
    const ended = () => over
    link.receive([{ type: 'hello', v: PROTOCOL_VERSION }, { type: 'take', child: 'c', token: 't' }])
    expect(takes).toEqual([{ type: 'take', child: 'c', token: 't' }])
    expect(ended()).toBe(false)
  })

  it('a second hello on a link is a protocol error: a node that links again does so on a link of its own, so its children end and the link with them', async () => {
    const { link, sent, ended } = nodeLink()
    const faults: unknown[] = []
    link.channel.adopt({ id: 'c', busy: false, receive: () => {}, broken: () => {}, end: (fault) => void faults.push(fault) })
    await turn()
    link.receive([{ type: 'hello', v: PROTOCOL_VERSION }])
    await turn()
    expect(faults).toEqual([{ stopReason: 'error', diagnostic: "protocol error: the node n1 sent a second 'hello', so it was stopped" }])
    expect(sent.filter((message) => message.type === 'welcome')).toHaveLength(1)
    expect(ended()).toBe(true)
  })

  it('a refused take is answered with a drop', async () => {
    const { link, sent } = nodeLink()
    link.refuse('c')
    await turn()
    expect(sent).toContainEqual({ type: 'drop', child: 'c' })
  })

  it('a message about a child not given to the node is a violation: the node is given up on', () => {
    const { link, sent, ended } = nodeLink()
    link.receive([{ type: 'created', child: 'stranger' }])
    expect(ended()).toBe(true)
    expect(sent).toContainEqual({ type: 'bye' })
  })

  it("an unproven node's word on its room is not believed: nothing is placed on it until a take of it was accepted", () => {
    const { link } = nodeLink()
    link.receive([{ type: 'room', level: 1, free: 3, placed: 0 }])
    expect(link.room(1)).toBe(0)
    link.proven()
    expect(link.room(1)).toBe(3)
  })

  it("the node's room decides, less the placements it had not counted when it spoke", () => {
    const { link, ended } = nodeLink()
    link.proven()
    expect(link.room(1)).toBe(0) // no word yet: nothing is placed on it
    link.receive([{ type: 'room', level: 1, free: 3, placed: 0 }, { type: 'room', level: 2, free: 1, placed: 0 }])
    expect([link.room(1), link.room(2), link.room(3)]).toEqual([3, 1, 0])
    link.placed(1)
    link.placed(1)
    expect(link.room(1)).toBe(1)
    // It had counted one of the two when it said 2: one is still on its way.
    link.receive([{ type: 'room', level: 1, free: 2, placed: 1 }])
    expect(link.room(1)).toBe(1)
    // A node that claims more placements than were made is held to those made.
    link.receive([{ type: 'room', level: 1, free: 2, placed: 9 }])
    expect(link.room(1)).toBe(2)
    link.full(1)
    expect(link.room(1)).toBe(0)
    expect(ended()).toBe(false)
  })

  it('a frame of room words alone is not a runner frame: the channel is not bothered with it', () => {
    const { link, ended } = nodeLink()
    link.proven()
    link.receive([{ type: 'room', level: 1, free: 1, placed: 0 }])
    expect(ended()).toBe(false)
    expect(link.room(1)).toBe(1)
  })

  it('room past belief is a violation: the node is given up on, and nothing is placed on it', () => {
    const { link, sent, ended } = nodeLink()
    link.receive([{ type: 'room', level: 1, free: 10_000_000, placed: 0 }])
    expect(ended()).toBe(true)
    expect(sent).toContainEqual({ type: 'bye' })
    expect(link.room(1)).toBe(0)
  })

  it('an ended link has no room', () => {
    const { link } = nodeLink()
    link.proven()
    link.receive([{ type: 'room', level: 1, free: 4, placed: 0 }])
    link.stop({ stopReason: 'error', diagnostic: 'gone' })
    expect(link.room(1)).toBe(0)
  })
})

describe('the envelope between a host and a node', () => {
  it('carries the sender, the frame and the link; an older sender names no link', () => {
    expect(decode(encode('n1', 'link-1', [{ type: 'pong', n: 1 }]))).toEqual({ from: 'n1', link: 'link-1', frame: [{ type: 'pong', n: 1 }] })
    expect(decode(serialize(['n1', [{ type: 'hello', v: 1 }]]))).toEqual({ from: 'n1', link: '', frame: [{ type: 'hello', v: 1 }] })
  })

  it('refuses a link that is no id of at most 64 characters, and any other shape', () => {
    for (const link of ['x'.repeat(65), 7, null]) {
      expect(decode(serialize(['n1', [], link]))).toMatchObject({ code: 'ERR_SUBAGENT_REMOTE_SHAPE', message: "the envelope's link is not an id of at most 64 characters" })
    }
    expect(decode(serialize(['n1', [], 'l', 'extra']))).toMatchObject({ code: 'ERR_SUBAGENT_REMOTE_SHAPE', message: 'not a [sender, frame, link] envelope' })
    expect(decode(serialize([1, []]))).toMatchObject({ code: 'ERR_SUBAGENT_REMOTE_SHAPE' })
  })
})
