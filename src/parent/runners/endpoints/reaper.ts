/**
 * Child-process runners die with their host, however it dies: a runner exits when its IPC
 * channel closes, but one blocked in a synchronous loop never sees that, so a watch that does
 * not depend on the runner's loop kills it. That watch is the reaper (reaper-entry.ts), one
 * process for the whole host process (every host in it), started with its first runner and
 * ended once its last runner has exited. The host lists its runners on the reaper's stdin; the
 * kernel closes that pipe when the host dies, and the reaper then kills every runner listed.
 *
 * The reaper never keeps the host alive (its handles are unref'd). If it is itself killed, the
 * next runner started starts another, which is told every runner still running.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import type { Socket } from 'node:net'
import { join } from 'node:path'
import { packageRoot } from './runner-code.js'


/** The pids of this process's runners that have not exited. */
const runners = new Set<number>()
/** The reaper while any runner runs; undefined before the first, after the last, or once it died. */
let reaper: ChildProcess | undefined

/** Has `pid` (a runner just started) killed should this process die before it exits. */
export function watchRunner(pid: number): void {
  runners.add(pid)
  if (reaper) tell(reaper, `+${pid}`)
  else reaper = startReaper()
}

/** `pid` (a runner) has exited: it must not be killed, the pid may be another's soon. */
export function forgetRunner(pid: number): void {
  if (!runners.delete(pid) || !reaper) return
  tell(reaper, `-${pid}`)
  if (runners.size > 0) return
  // No runner left: the reaper sees its stdin end with nobody listed, and exits.
  reaper.stdin?.end()
  reaper = undefined
}

function startReaper(): ChildProcess {
  // Outside the permission model, with no flags or environment of the host's: it needs neither.
  const child = spawn(process.execPath, [join(packageRoot(), 'dist', 'parent', 'runners', 'endpoints', 'reaper-entry.js')], { stdio: ['pipe', 'ignore', 'inherit'], env: {} })
  const lost = () => {
    if (reaper === child) reaper = undefined
  }
  child.on('error', lost) // could not start: the next runner tries again
  child.on('exit', lost)
  child.stdin?.on('error', lost) // EPIPE once it is gone; its 'exit' says the rest
  child.unref()
  ;(child.stdin as Socket | null)?.unref()
  tell(child, [...runners].map((pid) => `+${pid}`).join('\n'))
  return child
}

function tell(child: ChildProcess, lines: string): void {
  child.stdin?.write(`${lines}\n`)
}
