/**
 * A continuable child's next activation waits for a runner slot (CONTRACT.md §13: idle holds
 * none). What happens to it meanwhile counts: a budget above it spent while it waited refuses it
 * (§11: no further request, nothing of it runs), and a dispose while it waited ends it aborted
 * as any cancel does, with nothing said of a failure to build it.
 */
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import type { Agent, ContinuableRun, Host, ModelRequest, Settlement, StreamChunk } from 'subagent-worker'
import { POOLED } from '../support/harness.js'
import { Watch } from '../support/watch.js'
import { closeWorkerHosts, workerHost } from '../support/worker-host.js'

afterEach(closeWorkerHosts)

const FAULT_MODULE = fileURLToPath(new URL('../fixtures/fault-module.mjs', import.meta.url))

async function settlement(run: ContinuableRun, activation: number): Promise<Settlement> {
  for await (const settled of run.settlements) if (settled.activation === activation) return settled
  throw new Error(`child ${run.id} ended before activation ${activation}`)
}

/** A host model that holds its first request until `release()`, then streams `chunks`; `asked` resolves once it holds. */
function heldModel(chunks: StreamChunk[]) {
  const watch = new Watch()
  let held = false
  let release!: () => void
  const gate = new Promise<void>((resolve) => (release = resolve))
  const model = {
    async *stream(_request: ModelRequest): AsyncGenerator<StreamChunk> {
      held = true
      watch.changed()
      await gate
      yield* chunks
    },
  }
  return { model, release, asked: () => watch.until('the held request', () => held) }
}

describe.each(POOLED)('a continuable activation waiting for a runner [%s]', (isolation) => {
  // One slot: while a one-shot sibling holds it, the continuable child's next activation waits to be built.
  const oneSlot = { isolation, pool: { minThreads: 1, maxThreads: 1, childrenPerWorker: 1 } } as const

  /** A continuable child of `parent` past its first activation, its second waiting for the slot a sibling on `sibling`'s held model takes. */
  async function waitingForTheSlot(host: Host, parent: Agent, sibling: ReturnType<typeof heldModel>) {
    host.models.register('sibling', sibling.model)
    // Its model is the module's, which the host never meters: only the host's refusal can keep it from running.
    const child = await host.spawn.startContinuable({ prompt: 'first', parent, agentOptions: { provider: 'module-echo' } })
    expect((await settlement(child, 1)).stopReason).toBe('completed')
    const holder = await host.spawn.start({ prompt: 'hold', parent, agentOptions: { provider: 'sibling' } })
    await sibling.asked()
    child.send('second')
    return { child, holder }
  }

  it('§11 a budget above it spent meanwhile refuses it: aborted with the limit, and it never runs', async () => {
    const { host } = workerHost(FAULT_MODULE, [], oneSlot)
    const parent = host.createAgent({ options: { provider: 'scripted' }, limits: { maxTotalTokens: 50 } })
    const spender = heldModel([{ type: 'text-delta', text: 'spent' }, { type: 'usage', inputTokens: 50, outputTokens: 50 }, { type: 'finish', reason: 'stop' }])
    const { child, holder: sibling } = await waitingForTheSlot(host, parent, spender)
    spender.release() // the sibling spends the parent's whole budget, and leaves the slot
    expect((await sibling.result).stopReason).toBe('completed')
    expect(await settlement(child, 2)).toMatchObject({ stopReason: 'aborted', diagnostic: 'the child exceeded limits.maxTotalTokens (50 tokens)', output: [] })
    expect(host.agents.get(child.id)!.session.events.filter((event) => event.type === 'turn/start')).toHaveLength(1)
    await Promise.all([sibling.dispose(), child.dispose()])
  })

  it('§13 disposed meanwhile: aborted, with no diagnostic (nothing failed to build)', async () => {
    const { host, parent } = workerHost(FAULT_MODULE, [], oneSlot)
    const holder = heldModel([{ type: 'text-delta', text: 'done' }, { type: 'finish', reason: 'stop' }])
    const { child, holder: sibling } = await waitingForTheSlot(host, parent, holder)
    const second = settlement(child, 2)
    await child.dispose()
    const settled = await second
    expect(settled.stopReason).toBe('aborted')
    expect(settled).not.toHaveProperty('diagnostic')
    holder.release()
    await sibling.result
    await sibling.dispose()
  })
})
