// CONTRACT.md §7 (Lifecycle events): subagent/start and subagent/end, paired by runId; observers never break a run.
import { afterEach, describe, expect, it } from 'vitest'
import { createSubagentTool, textResponse, toolCallResponse, type SubagentStartEvent } from 'subagent-worker'
import { closeHosts, setup, signal, tick, TRANSPORTS } from '../support/harness.js'
import { captureWarnings, recordLifecycle, rejectionOf } from '../support/driver-helpers.js'

afterEach(closeHosts)

const WARNING_CODE = 'SUBAGENT_LISTENER_ERROR'

describe.each(TRANSPORTS)('§7 lifecycle events [%s]', (transport) => {
  const local = transport === 'inline'

  it('§7 subagent/start carries exactly { runId, provider, id, local, parentId, depth } when the run is published', async () => {
    const fx = setup(transport, [textResponse('hello')])
    const lifecycle = recordLifecycle(fx.host)
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    expect(lifecycle.starts).toHaveLength(1)
    const start = lifecycle.starts[0]!
    expect(start).toEqual({ runId: expect.any(String), provider: 'spawn', id: run.id, local, parentId: fx.parent.id, depth: 1 })
    expect(start.runId).not.toBe('')
    await run.result
    await run.dispose()
  })

  it("§7 both events carry the child's label, and its depth counted from the parent's", async () => {
    const fx = setup(transport, [textResponse('labelled')])
    const lifecycle = recordLifecycle(fx.host)
    const parent = fx.host.createAgent({ options: { provider: 'scripted' }, header: { delegationDepth: 2 } })
    const run = await fx.host.spawn.start({ prompt: 'hi', parent, signal: signal(), label: 'researcher' })
    await run.result
    await lifecycle.ended(1)
    expect(lifecycle.starts[0]).toMatchObject({ label: 'researcher', parentId: parent.id, depth: 3 })
    expect(lifecycle.ends[0]).toMatchObject({ label: 'researcher', parentId: parent.id, depth: 3 })
    await run.dispose()
  })

  it('§2 §6 a child cancelled while it delegates in the foreground ends after its own child, which is let go by the time it is disposed', async () => {
    const fx = setup(transport, [toolCallResponse('t1', 'subagent', { description: 'grand', prompt: 'hold on' }), 'hang'])
    fx.host.tools.register(createSubagentTool(fx.host, { provider: 'spawn' }))
    const lifecycle = recordLifecycle(fx.host)
    const caller = new AbortController()
    const run = await fx.host.spawn.start({ prompt: 'delegate', parent: fx.parent, signal: caller.signal })
    await fx.model.requested(2) // the grandchild's request, which holds until it is aborted
    caller.abort()
    expect((await run.result).stopReason).toBe('aborted')
    await run.dispose()
    expect(lifecycle.order.map(([what, runId]) => `${what} ${runId === run.id ? 'child' : 'grandchild'}`)).toEqual(['start child', 'start grandchild', 'end grandchild', 'end child'])
    expect(fx.host.agents.list().map((agent) => agent.id)).toEqual([fx.parent.id])
    expect(fx.model.requests[1]!.signal.aborted).toBe(true)
  })

  it('§7 the child is already in host.agents when subagent/start listeners run', async () => {
    const fx = setup(transport, [textResponse('hello')])
    let seen: { id: string | undefined; inList: boolean } | undefined
    fx.host.on('subagent/start', (info) => {
      seen = { id: fx.host.agents.get(info.id)?.id, inList: fx.host.agents.list().some((a) => a.id === info.id) }
    })
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    expect(seen).toEqual({ id: run.id, inList: true })
    await run.result
    await run.dispose()
  })

  it('§7 subagent/end carries the start fields, stopReason, lastAssistantMessage, the duration and the usage when the run settles', async () => {
    const fx = setup(transport, [textResponse('hello there')])
    const lifecycle = recordLifecycle(fx.host)
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    await run.result
    await lifecycle.ended(1)
    expect(lifecycle.ends[0]).toEqual({
      runId: lifecycle.starts[0]!.runId,
      provider: 'spawn',
      id: run.id,
      local,
      parentId: fx.parent.id,
      depth: 1,
      stopReason: 'completed',
      lastAssistantMessage: 'hello there',
      durationMs: expect.any(Number),
      usage: { inputTokens: 0, outputTokens: 3 },
      totalUsage: { inputTokens: 0, outputTokens: 3 },
    })
    expect(lifecycle.ends[0]!.durationMs).toBeGreaterThanOrEqual(0)
    await run.dispose()
  })

  it("§7 a fork run's events name the provider 'fork'", async () => {
    const fx = setup(transport, [textResponse('forked')])
    const lifecycle = recordLifecycle(fx.host)
    const run = await fx.host.fork.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    await run.result
    await lifecycle.ended(1)
    expect(lifecycle.starts.map((e) => e.provider)).toEqual(['fork'])
    expect(lifecycle.ends.map((e) => e.provider)).toEqual(['fork'])
    await run.dispose()
  })

  it('§7 start and end are paired by runId: one start then one end per run, distinct runIds for concurrent runs', async () => {
    const fx = setup(transport, [
      { delayMs: 30, chunks: textResponse('a') },
      { delayMs: 10, chunks: textResponse('b') },
      textResponse('c'),
    ])
    const lifecycle = recordLifecycle(fx.host)
    const runs = await Promise.all(['a', 'b', 'c'].map((prompt) => fx.host.spawn.start({ prompt, parent: fx.parent, signal: signal() })))
    await Promise.all(runs.map((r) => r.result))
    await lifecycle.ended(3)
    await Promise.all(runs.map((r) => r.dispose()))
    const runIds = lifecycle.starts.map((e) => e.runId)
    expect(new Set(runIds).size).toBe(3)
    expect(lifecycle.ends.map((e) => e.runId).sort()).toEqual([...runIds].sort())
    for (const start of lifecycle.starts) {
      const end = lifecycle.ends.find((e) => e.runId === start.runId)!
      expect(end.id).toBe(start.id)
      const startAt = lifecycle.order.findIndex(([kind, id]) => kind === 'start' && id === start.runId)
      const endAt = lifecycle.order.findIndex(([kind, id]) => kind === 'end' && id === start.runId)
      expect(startAt).toBeLessThan(endAt)
    }
    expect(new Set(lifecycle.starts.map((e) => e.id))).toEqual(new Set(runs.map((r) => r.id)))
  })

  it("§7 subagent/end's stopReason is the result's stop reason (disposed while running → aborted)", async () => {
    const fx = setup(transport, ['hang'])
    const lifecycle = recordLifecycle(fx.host)
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    await fx.model.requested(1)
    await run.dispose()
    expect((await run.result).stopReason).toBe('aborted')
    await lifecycle.ended(1)
    expect(lifecycle.ends[0]).toMatchObject({ runId: lifecycle.starts[0]!.runId, id: run.id, stopReason: 'aborted' })
  })

  it("§7 subagent/end's stopReason is the result's stop reason (model error → error, no lastAssistantMessage)", async () => {
    const fx = setup(transport, [
      () => {
        throw new Error('down')
      },
    ])
    const lifecycle = recordLifecycle(fx.host)
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    expect((await run.result).stopReason).toBe('error')
    await lifecycle.ended(1)
    // Not completed: the diagnostic comes along; nothing was streamed, so no lastAssistantMessage nor usage.
    expect(lifecycle.ends[0]).toEqual({
      runId: lifecycle.starts[0]!.runId,
      provider: 'spawn',
      id: run.id,
      local,
      parentId: fx.parent.id,
      depth: 1,
      stopReason: 'error',
      durationMs: expect.any(Number),
      diagnostic: expect.stringContaining('down'),
    })
    await run.dispose()
  })

  it('§7 a run aborted in the hand-off gap still emits a paired subagent/end with stopReason aborted', async () => {
    const fx = setup(transport, [textResponse('never')])
    const controller = new AbortController()
    fx.host.on('subagent/start', () => controller.abort())
    const lifecycle = recordLifecycle(fx.host)
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: controller.signal })
    await run.result
    await lifecycle.ended(1)
    expect(lifecycle.ends[0]).toMatchObject({ runId: lifecycle.starts[0]!.runId, id: run.id, stopReason: 'aborted' })
    await run.dispose()
  })

  it('§7 a run still live when the host closes emits its subagent/end', async () => {
    const fx = setup(transport, ['hang'])
    const lifecycle = recordLifecycle(fx.host)
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    await fx.model.requested(1)
    await fx.host.close()
    expect((await run.result).stopReason).toBe('aborted')
    await lifecycle.ended(1)
    expect(lifecycle.ends[0]).toMatchObject({ runId: lifecycle.starts[0]!.runId, stopReason: 'aborted' })
  })

  it('§7 subagent/end is emitted exactly once per run, however often it is disposed', async () => {
    const fx = setup(transport, [textResponse('once')])
    const lifecycle = recordLifecycle(fx.host)
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    await run.result
    await Promise.all([run.dispose(), run.dispose()])
    await run.dispose()
    await fx.host.close()
    await tick(20) // no second subagent/end comes late
    expect(lifecycle.starts).toHaveLength(1)
    expect(lifecycle.ends).toHaveLength(1)
  })

  it('§7 a start() that rejects emits neither subagent/start nor subagent/end', async () => {
    const fx = setup(transport, [textResponse('never')])
    const lifecycle = recordLifecycle(fx.host)
    await rejectionOf(fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal(), maxDepth: 0 }))
    await rejectionOf(fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal(), toolFilter: { allow: ['missing'] } }))
    await tick(20) // no subagent/start or end comes late
    expect(lifecycle.starts).toEqual([])
    expect(lifecycle.ends).toEqual([])
  })

  it("§7 a subagent/start listener that writes to its event changes nothing: start and end stay paired by runId", async () => {
    const fx = setup(transport, [textResponse('unbroken')])
    fx.host.on('subagent/start', (info) => {
      try {
        ;(info as { runId: string }).runId = 'overwritten'
      } catch {
        // the event is frozen: the write throws in strict code
      }
    })
    const lifecycle = recordLifecycle(fx.host)
    const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    await run.result
    await run.dispose()
    await lifecycle.ended(1)
    expect(lifecycle.starts.map((s) => s.runId)).toEqual([run.id])
    expect(lifecycle.ends.map((e) => e.runId)).toEqual([run.id])
  })

  it('§7 unsubscribing stops delivery', async () => {
    const fx = setup(transport, [textResponse('one'), textResponse('two')])
    const seen: SubagentStartEvent[] = []
    const off = fx.host.on('subagent/start', (info) => seen.push(info))
    const first = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    await first.result
    off()
    const second = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
    await second.result
    expect(seen.map((e) => e.id)).toEqual([first.id])
    await Promise.all([first.dispose(), second.dispose()])
  })

  it('§7 a throwing subagent/start listener is reported as a warning and never breaks the run', async () => {
    const capture = captureWarnings(WARNING_CODE)
    try {
      const fx = setup(transport, [textResponse('unbroken')])
      fx.host.on('subagent/start', () => {
        throw new Error('observer bug at start')
      })
      const after: string[] = []
      fx.host.on('subagent/start', (info) => after.push(info.id))
      const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
      expect(after).toEqual([run.id])
      expect(await run.result).toEqual({ output: [{ type: 'text', text: 'unbroken' }], usage: { inputTokens: 0, outputTokens: 2 }, totalUsage: { inputTokens: 0, outputTokens: 2 }, stopReason: 'completed' })
      await run.dispose()
      await capture.warned()
      expect(capture.warnings[0]!.message).toContain('observer bug at start')
    } finally {
      capture.stop()
    }
  })

  it('§7 a throwing subagent/end listener is reported as a warning and never breaks the run', async () => {
    const capture = captureWarnings(WARNING_CODE)
    try {
      const fx = setup(transport, [textResponse('unbroken')])
      fx.host.on('subagent/end', () => {
        throw new Error('observer bug at end')
      })
      const lifecycle = recordLifecycle(fx.host)
      const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
      expect(await run.result).toEqual({ output: [{ type: 'text', text: 'unbroken' }], usage: { inputTokens: 0, outputTokens: 2 }, totalUsage: { inputTokens: 0, outputTokens: 2 }, stopReason: 'completed' })
      await expect(run.dispose()).resolves.toBeUndefined()
      expect(fx.host.agents.get(run.id)).toBeUndefined()
      await lifecycle.ended(1)
      await capture.warned()
      expect(capture.warnings[0]!.message).toContain('observer bug at end')
    } finally {
      capture.stop()
    }
  })

  it('§7 an async listener that rejects is reported as a warning too, never an unhandled rejection', async () => {
    const capture = captureWarnings(WARNING_CODE)
    try {
      const fx = setup(transport, [textResponse('unbroken')])
      fx.host.on('subagent/end', async () => {
        throw new Error('async observer bug')
      })
      const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
      expect(await run.result).toEqual({ output: [{ type: 'text', text: 'unbroken' }], usage: { inputTokens: 0, outputTokens: 2 }, totalUsage: { inputTokens: 0, outputTokens: 2 }, stopReason: 'completed' })
      await run.dispose()
      await capture.warned()
      expect(capture.warnings[0]!.message).toContain('async observer bug')
    } finally {
      capture.stop()
    }
  })

  it('§7 listeners that throw or reject with a value that has no text (a null-prototype object holding a BigInt) are reported too: the run completes and its reader ends', async () => {
    const capture = captureWarnings(WARNING_CODE)
    try {
      const fx = setup(transport, [textResponse('unbroken')])
      const unprintable = (): unknown => Object.assign(Object.create(null) as object, { big: 1n })
      fx.host.on('subagent/start', () => {
        throw unprintable()
      })
      fx.host.on('subagent/event', () => {
        throw unprintable()
      })
      fx.host.on('subagent/end', async () => {
        throw unprintable()
      })
      const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
      const read: string[] = []
      for await (const event of run.events()) read.push(event.type)
      expect(read).toContain('turn/end')
      expect(await run.result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'unbroken' }] })
      await run.dispose()
      await capture.warned()
      expect(capture.warnings[0]!.message).toBe("a 'subagent/start' listener threw: an unprintable object")
    } finally {
      capture.stop()
    }
  })

  it('§7 a listener that throws a non-Error value is reported too, and the run still completes', async () => {
    const capture = captureWarnings(WARNING_CODE)
    try {
      const fx = setup(transport, [textResponse('unbroken')])
      fx.host.on('subagent/start', () => {
        throw 'a bare string'
      })
      const run = await fx.host.spawn.start({ prompt: 'hi', parent: fx.parent, signal: signal() })
      expect((await run.result).stopReason).toBe('completed')
      await run.dispose()
      await capture.warned()
    } finally {
      capture.stop()
    }
  })
})
