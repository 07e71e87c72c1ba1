/**
 * Issue 3 §6 and the scale rules, on each pooled transport: where models and tools run, name
 * clashes caught at start-up, hundreds of concurrent delegations, and a host that lets the
 * process exit after close().
 */
import { execFile } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { threadId } from 'node:worker_threads'
import { afterEach, describe, expect, it } from 'vitest'
import { createHost, createSubagentTool, defineTool, ScriptedModel, textResponse, toolCallResponse, toolCallsResponse, type Model } from 'subagent-worker'
import { POOLED, WatchedModel } from '../support/harness.js'

const FAULT_MODULE = fileURLToPath(new URL('../fixtures/fault-module.mjs', import.meta.url))
const hosts: Array<ReturnType<typeof createHost>> = []
afterEach(async () => {
  await Promise.all(hosts.splice(0).map((host) => host.close()))
})
const signal = () => new AbortController().signal

describe.each(POOLED)('%s transport: placement', (isolation) => {
  const host = (options: Parameters<typeof createHost>[0] = {}) => {
    const created = createHost({ isolation, agentModule: FAULT_MODULE, ...options })
    hosts.push(created)
    return created
  }
  /** Where code ran: a thread of this process, or another process. */
  const here = { threadId, pid: process.pid }
  const runnerOf = (where: { threadId: number; pid: number }) => (isolation === 'worker' ? where.threadId : where.pid)

  it('module tools and models run in the worker; host models and tools run in the main thread', async () => {
    const h = host()
    let modelPlace: object | undefined
    const script = new ScriptedModel([toolCallResponse('w', 'where', {}), toolCallResponse('h', 'host_where', {}), textResponse('done')])
    const secretModel: Model = {
      // The closure (say, an API key) never leaves the main thread: only chunks cross.
      stream(request) {
        modelPlace = { threadId, pid: process.pid }
        return script.stream(request)
      },
    }
    h.models.register('secret-model', secretModel)
    h.tools.register(defineTool({ name: 'host_where', description: 'thread', parameters: { type: 'object' }, execute: () => ({ threadId, pid: process.pid }) }))
    const parent = h.createAgent({ options: { provider: 'secret-model' } })
    const run = await h.spawn.start({ prompt: 'where?', parent, signal: signal() })
    expect((await run.result).stopReason).toBe('completed')
    const results = h.agents.get(run.id)!.session.events.filter((e) => e.type === 'tool/result').map((e) => (e.data as { value: { threadId: number; pid: number } }).value)
    expect(modelPlace).toEqual(here)
    expect(runnerOf(results[0]!)).not.toBe(runnerOf(here)) // module tool: on the runner
    expect(results[1]).toEqual(here) // host tool: in the host's main thread
    await run.dispose()
  })

  it('a module model answers from the runner', async () => {
    const h = host()
    const parent = h.createAgent({ options: { provider: 'module-echo' } })
    const run = await h.spawn.start({ prompt: 'hi', parent, signal: signal() })
    const { output } = await run.result
    expect(output).toHaveLength(1)
    const [, thread, pid] = /^module model on thread (\d+) in process (\d+)$/.exec((output[0] as { text: string }).text) ?? []
    expect(runnerOf({ threadId: Number(thread), pid: Number(pid) })).not.toBe(runnerOf(here))
    await run.dispose()
  })

  it('a name registered on the host and in the agent module is an error at start-up', async () => {
    const h = host()
    h.models.register('module-echo', new ScriptedModel([]))
    const parent = h.createAgent({ options: { provider: 'module-echo' } })
    await expect(h.spawn.start({ prompt: 'x', parent, signal: signal() })).rejects.toThrow(/registered on the host and in the agent module/)
    const loaded = host()
    await expect(loaded.spawn.start({ prompt: 'x', parent: loaded.createAgent(), signal: signal() })).resolves.toBeDefined()
    expect(() => loaded.tools.register(defineTool({ name: 'spin', description: 'clash', parameters: { type: 'object' }, execute: () => 1 }))).toThrow(/already defined by the agent module/)
  })
})

describe.each(POOLED)('%s transport: scale and shutdown', (isolation) => {
  const host = (options: Parameters<typeof createHost>[0] = {}) => {
    const created = createHost({ isolation, agentModule: FAULT_MODULE, ...options })
    hosts.push(created)
    return created
  }

  it('200 concurrent delegations complete and leave host.agents with only the parent', async () => {
    const h = host({ pool: { minThreads: 2, maxThreads: 4, childrenPerWorker: 8 } })
    h.models.register('scripted', new ScriptedModel(Array.from({ length: 200 }, (_, i) => textResponse(`answer ${i}`))))
    const parent = h.createAgent({ options: { provider: 'scripted' } })
    const outputs = await Promise.all(
      Array.from({ length: 200 }, async () => {
        const run = await h.spawn.start({ prompt: 'go', parent, signal: signal() })
        const result = await run.result
        await run.dispose()
        return result
      }),
    )
    expect(outputs.every((r) => r.stopReason === 'completed')).toBe(true)
    expect(new Set(outputs.map((r) => JSON.stringify(r.output))).size).toBe(200)
    expect(h.agents.list().map((a) => a.id)).toEqual([parent.id])
  })

  it('starts beyond pool capacity wait for a slot instead of failing', async () => {
    const h = host({ pool: { minThreads: 1, maxThreads: 1 } })
    h.models.register('scripted', new ScriptedModel([{ delayMs: 50, chunks: textResponse('first') }, textResponse('second')]))
    const parent = h.createAgent({ options: { provider: 'scripted' } })
    const [a, b] = await Promise.all([h.spawn.start({ prompt: '1', parent, signal: signal() }), h.spawn.start({ prompt: '2', parent, signal: signal() })])
    expect((await a.result).stopReason).toBe('completed')
    expect((await b.result).stopReason).toBe('completed')
    await Promise.all([a.dispose(), b.dispose()])
  })

  it('pool.maxQueue bounds the starts waiting for a slot: one more is refused at once, and an aborted wait frees its place', async () => {
    const h = host({ pool: { minThreads: 1, maxThreads: 1, maxQueue: 1 } })
    const model = new WatchedModel(['hang', textResponse('queued one')])
    h.models.register('scripted', model)
    const parent = h.createAgent({ options: { provider: 'scripted' } })
    const running = await h.spawn.start({ prompt: 'hold the slot', parent })
    // Its request is made, and takes the script's 'hang': a child cancelled before its request reaches the host never makes it.
    await model.requested(1)
    const leaving = new AbortController()
    const waiting = h.spawn.start({ prompt: 'wait', parent, signal: leaving.signal })
    await expect(h.spawn.start({ prompt: 'one too many', parent })).rejects.toThrow(
      'every slot is taken (1 runners × 1 children) and pool.maxQueue (1) starts already wait for one: retry later, or raise pool.maxThreads, pool.childrenPerWorker or pool.maxQueue',
    )
    leaving.abort(new Error('gave up waiting'))
    await expect(waiting).rejects.toThrow('subagent request was aborted before child publication')
    const queued = h.spawn.run({ prompt: 'queued', parent }) // the freed place in the queue
    await running.dispose()
    expect((await queued).output).toEqual([{ type: 'text', text: 'queued one' }])
  })

  it('after close() no runner, port or timer keeps the process alive, and no process it started is left', async () => {
    const script = fileURLToPath(new URL('../fixtures/close-exits.mjs', import.meta.url))
    // execFile settles once the fixture's stdout and stderr are closed by every process holding
    // them (runners inherit its stdout, the reaper its stderr): the moment they all exited.
    const { stdout } = await promisify(execFile)(process.execPath, [script, isolation], { timeout: 45_000 })
    const [closed, listed] = stdout.trim().split('\n')
    expect(closed).toBe('closed aborted')
    const pids = /^still running after close:([\d ]*)$/.exec(listed ?? '')![1]!.split(' ').filter(Boolean).map(Number)
    expect(pids.filter(running)).toEqual([])
  })

  it('a host tool that ignores its signal and never settles holds the process until the grace, and the cancelled run settles', async () => {
    const script = fileURLToPath(new URL('../fixtures/tool-never-settles.mjs', import.meta.url))
    // A run left pending when nothing holds the loop ends the process at once (exit code 13, an unsettled await).
    const { stdout } = await promisify(execFile)(process.execPath, [script, isolation], { timeout: 45_000 })
    expect(stdout).toBe('settled aborted\n')
  })

  it('nested delegations cannot deadlock the pool: each depth has slots of its own', async () => {
    // One slot per level: with a single shared pool the first child would hold the only slot
    // while waiting for its own child, which could then never start.
    const h = host({ pool: { minThreads: 1, maxThreads: 1 } })
    const delegate = (id: string) => toolCallResponse(id, 'subagent', { description: 'nested', prompt: 'go deeper' })
    h.models.register(
      'scripted',
      new ScriptedModel([
        toolCallsResponse([
          { id: 'a', name: 'subagent', args: { description: 'first', prompt: 'one' } },
          { id: 'b', name: 'subagent', args: { description: 'second', prompt: 'two' } },
        ]),
        delegate('a1'),
        textResponse('grandchild one'),
        textResponse('child one'),
        delegate('b1'),
        textResponse('grandchild two'),
        textResponse('child two'),
        textResponse('parent done'),
      ]),
    )
    h.tools.register(createSubagentTool(h, { provider: 'spawn', maxDepth: 2 }))
    const parent = h.createAgent({ options: { provider: 'scripted' } })
    parent.followup('delegate twice')
    await parent.whenIdle()
    const results = parent.session.events.filter((e) => e.type === 'tool/result').map((e) => (e.data as { content: Array<{ text: string }> }).content[0]!.text)
    expect(results).toEqual(['child one', 'child two'])
  })
})


/** Whether a process runs (a zombie, exited and not yet reaped, does not); without /proc, whether it exists. */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z'
  } catch (error) {
    if ((error as { code?: string }).code !== 'ENOENT' || existsSync('/proc/self/stat')) return false
    try {
      process.kill(pid, 0)
      return true
    } catch {
      return false
    }
  }
}
