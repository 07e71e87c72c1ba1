/**
 * The reaper on its own, both of it: the shell script a host starts where there is a POSIX shell
 * and the Node entry it starts where there is none (src/parent/runners/endpoints/reaper.ts,
 * reaper-entry.ts). When its stdin ends it kills every runner still listed, and never one listed
 * as exited (its pid may be another process's by then).
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { REAPER_SH } from '../../dist/parent/runners/endpoints/reaper.js'

const REAPERS: ReadonlyArray<[string, string, string[]]> = [
  ['the shell script', '/bin/sh', ['-c', REAPER_SH]],
  ['the Node entry', process.execPath, [fileURLToPath(new URL('../../dist/parent/runners/endpoints/reaper-entry.js', import.meta.url))]],
]
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

describe.each(REAPERS)('the reaper, %s', (_, file, args) => {
  /** A reaper told `lines`, its stdin then ended; its exit code. */
  function reaper(lines: string[]): Promise<number | null> {
    const child = spawn(file, args, { stdio: ['pipe', 'ignore', 'inherit'], env: {} })
    started.push(child)
    child.stdin.end(lines.map((line) => `${line}\n`).join(''))
    return new Promise((resolve) => child.once('exit', resolve))
  }

  it('kills every runner still listed when its stdin ends, and spares one that exited', async () => {
    const [listed, alsoListed, exited] = [sleeper(), sleeper(), sleeper()]
    expect(await reaper([`+${listed.pid}`, `+${exited.pid}`, `+${alsoListed.pid}`, `-${exited.pid}`, 'not a line', '+-3'])).toBe(0)
    expect(await listed.ended).toBe('SIGKILL')
    expect(await alsoListed.ended).toBe('SIGKILL')
    expect(() => process.kill(exited.pid, 0)).not.toThrow() // still running
  })
})
