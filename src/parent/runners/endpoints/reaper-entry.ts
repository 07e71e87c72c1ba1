/**
 * The reaper in Node: a small process the host starts beside its child-process runners (see
 * reaper.ts, whose shell script does the same and is started instead wherever there is a
 * `/bin/sh`), so that they die with the host even when one is blocked in a synchronous loop and
 * cannot see its IPC channel close. The host writes `+<pid>` for each runner it starts and `-<pid>` for each
 * one that has exited, a line each, on this process's stdin. When stdin ends, the host is gone
 * (or has no runner left): every runner still listed is killed with SIGKILL, and the reaper exits.
 *
 * It imports nothing of ours, runs outside the permission model, and its loop never blocks.
 */
import { readFileSync } from 'node:fs'

/** Each listed runner with its start time, where /proc gives one: a pid reused by another process is not killed. */
const runners = new Map<number, string | undefined>()
let unread = ''

/** Field 22 of /proc/<pid>/stat (counted past the name, which may hold spaces); undefined without /proc. */
function startTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]
  } catch {
    return undefined
  }
}

function heard(line: string): void {
  const pid = Number(line.slice(1))
  if (!Number.isSafeInteger(pid) || pid <= 0) return
  if (line.startsWith('+')) runners.set(pid, startTime(pid))
  else if (line.startsWith('-')) runners.delete(pid)
}

function read(chunk: string): void {
  const lines = (unread + chunk).split('\n')
  unread = lines.pop() ?? ''
  for (const line of lines) heard(line)
}

function reap(): void {
  for (const [pid, started] of runners) {
    if (started !== undefined && startTime(pid) !== started) continue // already gone, and the pid is another's now
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // already gone
    }
  }
  process.exit(0)
}

// The host's end of stdin closing is the only cue: a signal sent to the whole process group (a
// Ctrl-C) must not take the reaper away from a host that survives it.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => {})
process.stdin.setEncoding('utf8')
process.stdin.on('data', read)
process.stdin.on('end', reap)
process.stdin.on('error', reap)
