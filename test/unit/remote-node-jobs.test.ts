/**
 * A node's jobs against a broker driven by hand (no Redis): what the node tells its broker to do
 * with a job it took, when it shuts down before asking the job's host for the child.
 */
import { describe, expect, it } from 'vitest'
import { remoteNodeSettings, startRemoteNode } from '../../dist/remote/node.js'
import { childJob, decode } from '../../dist/remote/envelope.js'
import type { NodeBroker, RunJob } from '../../dist/remote/broker.js'
import { Watch } from '../support/watch.js'

/** A broker whose channel is listened to at the start, then deaf (as after a dropped connection) until `hear()`. */
function deafBroker() {
  let run: RunJob | undefined
  let hear!: () => void
  const heard = new Promise<void>((resolve) => (hear = resolve))
  let listened = 0
  const sent: Buffer[] = []
  const broker: NodeBroker = {
    levels: 4,
    listening: () => (listened++ === 0 ? Promise.resolve() : heard),
    take: async (_concurrency, given) => void (run = given),
    roomFreed: () => {},
    send: (_host, bytes) => void sent.push(bytes),
    stop: async () => {},
    close: async () => {},
  }
  return { open: () => broker, run: (...args: Parameters<RunJob>) => run!(...args), hear, sent }
}

describe("a node's jobs", () => {
  it("a job taken while the node's channel is deaf, and the node shut down before it could ask for the child, goes back to the queue: nothing was asked", async () => {
    const broker = deafBroker()
    const node = await startRemoteNode(remoteNodeSettings({ name: 'n1', log: () => {} }), broker.open)
    const ran = broker.run(childJob('h1', 'c1'), 1, 'token')
    const closed = node.close(0)
    broker.hear()
    expect(await ran).toBe('unasked')
    await closed
    expect(broker.sent).toEqual([])
  })

  it("a job waiting for its link's welcome when the node shuts down goes back to the queue at once, unasked, while the broker still waits on the job whose take rode the hello", async () => {
    const watch = new Watch()
    let stopped!: () => void
    const stopping = new Promise<void>((resolve) => (stopped = resolve))
    let run: RunJob | undefined
    const sent: Buffer[] = []
    // Its stop waits, as BullMQ's waits on the jobs it holds, until the test lets it go.
    const broker: NodeBroker = {
      levels: 4,
      listening: () => Promise.resolve(),
      take: async (_concurrency, given) => void (run = given),
      roomFreed: () => {},
      send: (_host, bytes) => void (sent.push(bytes), watch.changed()),
      stop: () => stopping,
      close: async () => {},
    }
    // Patient with a silent host: only the shutdown ends the link.
    const node = await startRemoteNode(remoteNodeSettings({ name: 'n1', hostSilenceMs: 60_000, log: () => {} }), () => broker)
    // The host never answers: c1's take rode the hello, c2's waits for the welcome.
    const first = run!(childJob('h1', 'c1'), 1, 'token-1')
    await watch.until("c1's take", () => sent.length === 1)
    let second: string | undefined
    void run!(childJob('h1', 'c2'), 1, 'token-2').then((ran) => ((second = ran), watch.changed()))
    // Its broker listens already: within this turn c2's job reaches the wait for the link's welcome.
    await new Promise((resolve) => setImmediate(resolve))
    expect(second).toBeUndefined()
    const closed = node.close(60_000)
    await watch.until('c2 given back', () => second !== undefined)
    expect(second).toBe('unasked')
    stopped()
    expect(await first).toBe('unasked')
    await closed
    // One frame in all: c2's take was never sent.
    expect(sent.map((bytes) => (decode(bytes) as { frame: Array<{ type: string; child?: string }> }).frame.map(({ type, child }) => `${type} ${child ?? ''}`.trim()))).toEqual([['hello', 'take c1']])
  })
})
