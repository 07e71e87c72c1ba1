/**
 * Child-process runners die with their host, however it dies: a runner exits when its IPC
 * channel closes, but one blocked in a synchronous loop never sees that, so a watch that does
 * not depend on the runner's loop kills it. That watch is the reaper, one process for the whole
 * host process (every host in it), started with its first runner and ended once its last runner
 * has exited. The host lists its runners on the reaper's stdin; the kernel closes that pipe when
 * the host dies, and the reaper then kills every runner listed.
 *
 * The reaper is the shell script below where there is a POSIX shell, and reaper-entry.ts, the
 * same steps in Node, where there is none: a shell starts in a millisecond of CPU, Node in about
 * a hundred, paid at a host's first runner and again after its last one ended (BENCHMARKS.md, "The
 * reaper as a shell script").
 *
 * The reaper never keeps the host alive (its handles are unref'd). If it is itself killed, the
 * next runner started starts another, which is told every runner still running.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import type { Socket } from 'node:net'
import { distFile } from './runner-code.js'

/**
 * reaper-entry.ts's steps in POSIX sh, with builtins only (its environment is empty, PATH too).
 * Each runner is listed as `<pid>:<start time>`, the start time being field 22 of
 * /proc/<pid>/stat, counted past the name (which may hold spaces), or empty without /proc; at the
 * end a runner whose start time changed is gone and its pid another's, and is spared.
 */
export const REAPER_SH = `set -f
trap '' INT TERM HUP
started() {
  t=
  s=
  { read -r s < "/proc/$1/stat"; } 2>/dev/null || return 0
  s=\${s##*) }
  set -- $s
  t=\${20}
}
runners=
while IFS= read -r line; do
  pid=\${line#?}
  case $pid in ''|*[!0-9]*) continue ;; esac
  case $line in
    +*) started "$pid"; runners="$runners $pid:$t" ;;
    -*) kept=; for runner in $runners; do [ "\${runner%%:*}" = "$pid" ] || kept="$kept $runner"; done; runners=$kept ;;
  esac
done
for runner in $runners; do
  pid=\${runner%%:*}
  was=\${runner#*:}
  started "$pid"
  if [ -z "$was" ] || [ "$t" = "$was" ]; then kill -9 "$pid" 2>/dev/null; fi
done
`

/** How a reaper is started here: the shell script, or Node where there is no POSIX shell. */
let command: [string, string[]] | undefined

function reaperCommand(): [string, string[]] {
  return (command ??= hasShell() ? ['/bin/sh', ['-c', REAPER_SH]] : [process.execPath, [distFile('parent', 'runners', 'endpoints', 'reaper-entry.js')]])
}

/** Whether there is a POSIX shell to run the script; a host under Node's permission model, not granted /bin, is told no by a throw. */
function hasShell(): boolean {
  try {
    return existsSync('/bin/sh')
  } catch {
    return false
  }
}

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
  const [file, args] = reaperCommand()
  const child = spawn(file, args, { stdio: ['pipe', 'ignore', 'inherit'], env: {} })
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
