/**
 * The reaper (src/parent/runners/endpoints/reaper-entry.ts) on its own: when its stdin ends it kills every runner
 * still listed, and never one listed as exited (its pid may be another process's by then).
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'

const REAPER = fileURLToPath(new URL('../../dist/parent/runners/endpoints/reaper-entry.js', import.meta.url))
const started: ChildProcess[] = []
afterEach(() => {
  for (const child of started.splice(0)) child.kill('SIGKILL')
})

/** A process that would run until killed, and the promise of the signal that ends it. */
function sleeper(): { pid: number; ended: Promise<NodeJS.Signals | null> } {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' })
  started.push(child)
  return { pid: child.pid!, ended: new Promise((resolve) => child.once('exit', (_, signal) => resolve(signal))) }
}

function reaper(lines: string[]): Promise<number | null> {
  const child = spawn(process.execPath, [REAPER], { stdio: ['pipe', 'ignore', 'inherit'] })
  started.push(child)
  child.stdin.end(lines.map((line) => `${line}\n`).join(''))
  return new Promise((resolve) => child.once('exit', resolve))
}

describe('the reaper', () => {
  it('kills every runner still listed when its stdin ends, and spares one that exited', async () => {
    const [listed, alsoListed, exited] = [sleeper(), sleeper(), sleeper()]
    expect(await reaper([`+${listed.pid}`, `+${exited.pid}`, `+${alsoListed.pid}`, `-${exited.pid}`, 'not a line', '+-3'])).toBe(0)
    expect(await listed.ended).toBe('SIGKILL')
    expect(await alsoListed.ended).toBe('SIGKILL')
    expect(() => process.kill(exited.pid, 0)).not.toThrow() // still running
  })
})
