/**
 * A node's jobs against a broker driven by hand (no Redis): what the node tells its broker to do
 * with a job it took, when it shuts down before asking the job's host for the child.
 */
import { describe, expect, it } from 'vitest'
import { remoteNodeSettings, startRemoteNode } from '../../dist/remote/node.js'
import { childJob } from '../../dist/remote/envelope.js'
import type { NodeBroker, RunJob } from '../../dist/remote/broker.js'

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
})
