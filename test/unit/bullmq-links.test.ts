/**
 * The two ends of a host↔node link, driven by hand (no Redis): the node's version check of the
 * host's welcome, its distrust of a malformed frame, and the host's answer to a node that built a
 * child the host gave up on while it was queued.
 */
import { describe, expect, it } from 'vitest'
import { HostLink } from '../../dist/bullmq/host-link.js'
import { RunnerChannel } from '../../dist/parent/channel.js'
import { PROTOCOL_VERSION, type HostMessage, type RunnerMessage } from '../../dist/protocol/messages.js'

const turn = () => new Promise((resolve) => setImmediate(resolve))

function hostLink() {
  const sent: RunnerMessage[] = []
  let ended = false
  const link = new HostLink({ host: 'h1', label: 'node n1', send: (frame) => void sent.push(...frame), ended: () => void (ended = true) })
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

  it('a create over the link is refused: children come from the queue only', async () => {
    const { link, sent, ended } = hostLink()
    link.receive([{ type: 'welcome', v: PROTOCOL_VERSION, config: { maxParallelToolCalls: 3 } }])
    link.receive([{ type: 'create', child: 'c', spec: { id: 'c', header: { id: 'c', createdAt: 'now' }, options: {}, seed: [], descriptor: { mode: 'one-shot', provider: 'spawn' } }, hostModels: [], hostTools: [] }])
    expect(sent.at(-1)).toMatchObject({ type: 'fatal', error: { message: expect.stringContaining('the host sent a create message over the link') } })
    expect(ended()).toBe(true)
  })

  it('bye ends the link: the host is done with it', () => {
    const { link, ended } = hostLink()
    link.receive([{ type: 'bye' }])
    expect(ended()).toBe(true)
  })
})

describe("a host's link to a node", () => {
  function nodeChannel(claim: (child: string) => 'unwanted' | undefined) {
    const sent: HostMessage[] = []
    const kills: Array<{ diagnostic: string }> = []
    const channel = new RunnerChannel({
      kind: { noun: 'node', ended: 'given up on' },
      label: 'node n1',
      config: { maxParallelToolCalls: 8 },
      send: (frame) => void sent.push(...frame),
      kill: (fault) => void kills.push(fault),
      crashed: () => {},
      changed: () => {},
      claim,
    })
    return { channel, sent, kills }
  }

  it('a child the host gave up on while queued, built by a node anyway, is dropped; its late messages are expected', async () => {
    const { channel, sent, kills } = nodeChannel((child) => (child === 'late' ? 'unwanted' : undefined))
    channel.receive([{ type: 'hello', v: PROTOCOL_VERSION }, { type: 'created', child: 'late' }])
    await turn()
    expect(sent).toContainEqual({ type: 'drop', child: 'late' })
    channel.receive([{ type: 'dropped', child: 'late' }])
    expect(kills).toEqual([])
  })

  it('a message about a child never queued is a violation: the node is given up on', () => {
    const { channel, kills } = nodeChannel(() => undefined)
    channel.receive([{ type: 'hello', v: PROTOCOL_VERSION }, { type: 'created', child: 'stranger' }])
    expect(kills).toEqual([{ stopReason: 'error', diagnostic: "protocol error: the node n1 sent a 'created' message for a child it does not host, so it was stopped" }])
  })
})
