/**
 * What one runner can make its host do is bounded (RUNNER_BOUNDS, issue 16 item 9): module code
 * on the runner floods its channel, sends a frame too long or too large, answers pings never sent
 * and runs more host calls at once than its loop may. Each time the runner is stopped and its
 * children's diagnostics name the bound, and the host's own loop keeps turning.
 */
import { fileURLToPath } from 'node:url'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { afterEach, describe, expect, it } from 'vitest'
import { closeWorkerHosts, workerHost as hostOn } from '../support/worker-host.js'
import { defineTool, toolCallResponse, textResponse, type HostOptions, type ScriptEntry } from 'subagent-worker'
import { POOLED } from '../support/harness.js'

const WIRE_MODULE = fileURLToPath(new URL('../fixtures/wire-module.mjs', import.meta.url))
afterEach(closeWorkerHosts)

describe.each(POOLED)('%s transport', (isolation) => {
  const workerHost = (script: ScriptEntry[], options: HostOptions = {}) => hostOn(WIRE_MODULE, script, { isolation, ...options })
  const noun = isolation === 'worker' ? 'worker thread' : 'child process'
  const stopped = (what: string) => new RegExp(`^protocol error: the ${noun} \\d+ sent ${what}, so it was stopped$`)
  const flood = (frames: number, messages: number) => toolCallResponse('f', 'flood', { frames, messages, message: { type: 'ready' } })

  it('one frame of a million messages is refused before it is read: the runner is stopped, its children say why', async () => {
    const { run } = workerHost([flood(1, 1_000_000), textResponse('never')])
    const { result } = await run()
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toMatch(stopped('a frame of 1000000 messages \\(one frame may carry at most 10000\\)'))
  })

  it('a flood of frames: the runner is stopped once it sends faster than the host reads, and the host’s loop keeps turning', async () => {
    // A thread posts a million one-message frames; a process, whose every send is slow, 100,000 frames of 100.
    const { run } = workerHost([isolation === 'worker' ? flood(1_000_000, 1) : flood(100_000, 100), textResponse('never')])
    const delay = monitorEventLoopDelay({ resolution: 10 })
    delay.enable()
    const { result } = await run()
    delay.disable()
    expect(result.stopReason).toBe('error')
    const bound = 'frames faster than the host can read them \\((500 frames or 5000 messages a turn, 100 turns in a row|more than 100000 messages waiting to be read)\\)'
    expect(result.diagnostic).toMatch(stopped(bound))
    // Reported, not asserted (a timing on a shared machine): the goal is under 50 ms.
    console.log(`${isolation}: host event-loop delay during the flood: p99 ${(delay.percentile(99) / 1e6).toFixed(1)} ms, max ${(delay.max / 1e6).toFixed(1)} ms`)
  }, 60_000)

  it('an array that claims more items than a frame can hold (a sparse one) is refused by its length, before anything loops over it', async () => {
    const { run } = workerHost([toolCallResponse('s', 'sparse', {}), textResponse('never')])
    const { result } = await run()
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toMatch(stopped('a frame larger than 67108864 bytes'))
  })

  it('an event larger than the bound is refused before it is read', async () => {
    const { run } = workerHost([toolCallResponse('b', 'big_events', { events: 1, chars: 17 * 1024 * 1024 }), textResponse('never')])
    const { result } = await run()
    expect(result.diagnostic).toMatch(stopped(`an event larger than ${16 * 1024 * 1024} bytes`))
  })

  it('a frame larger than the bound is refused before it is read, whatever the size of each event', async () => {
    const { run } = workerHost([toolCallResponse('b', 'big_events', { events: 70, chars: 1024 * 1024 }), textResponse('never')])
    const { result } = await run()
    expect(result.diagnostic).toMatch(stopped(`a frame larger than ${64 * 1024 * 1024} bytes`))
  })

  it.runIf(isolation === 'worker')('a message on the thread’s own port, which the runner never uses, stops the runner', async () => {
    const { run } = workerHost([toolCallResponse('s', 'stray', {}), textResponse('never')])
    const { result } = await run()
    expect(result.diagnostic).toMatch(/^protocol error: a frame from the worker thread \d+ could not be read \(it posted on the thread's own port, which a runner never uses\), so it was stopped$/)
  })

  it('a pong that answers no ping stops the runner', async () => {
    const { run } = workerHost([toolCallResponse('f', 'forge', { frame: [{ type: 'pong', n: 999 }] }), textResponse('never')])
    const { result } = await run()
    expect(result.diagnostic).toMatch(stopped('an unsolicited pong \\(999, after \\d+ pings of which \\d+ were answered\\)'))
  })

  it('more host calls at once than the child’s loop may run stop the runner; no more than that many ever ran', async () => {
    let runs = 0
    const slow = defineTool({
      name: 'slow',
      description: 'Runs until it is aborted.',
      parameters: { type: 'object' },
      execute: (_args, { signal }) => new Promise((resolve) => (runs++, signal.addEventListener('abort', () => resolve('aborted')))),
    })
    const calls = Array.from({ length: 20 }, (_, i) => ({ type: 'rpc/call', child: '$self', call: 1000 + i, method: 'tool', payload: { name: 'slow', callId: `s${i}`, args: {} } }))
    const { host, run } = workerHost([toolCallResponse('f', 'forge', { frame: calls }), textResponse('never')], { maxParallelToolCalls: 2 })
    host.tools.register(slow)
    const { id, result } = await run()
    expect(result.diagnostic).toMatch(stopped(`more host calls for child ${id} than may run at once \\(maxParallelToolCalls \\+ 1: 3\\)`))
    expect(runs).toBe(3)
  })
})
