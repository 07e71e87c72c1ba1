/**
 * Another process's resident memory and CPU time, read from /proc (Linux). Node reports both only
 * for its own process (process.memoryUsage, process.cpuUsage), and the process transport runs its
 * children in processes of their own. Where there is no /proc the readings are unavailable, and
 * the figures that need them say so instead of leaving the runners out.
 */
import { existsSync, readFileSync } from 'node:fs'

export const PROC_AVAILABLE = existsSync('/proc/self/stat') && existsSync('/proc/self/status')

/** /proc counts CPU time in clock ticks of USER_HZ, which Linux fixes at 100 a second for user space. */
const US_PER_TICK = 1e6 / 100

/** The process's resident set (VmRSS), in bytes. */
export function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kib = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1]
  if (kib === undefined) throw new Error(`no VmRSS in /proc/${pid}/status`)
  return Number(kib) * 1024
}

/** The process's CPU time so far, user + system, every thread, in µs (10 ms resolution). */
export function cpuUs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  // The command name (field 2) may hold spaces and parentheses: count from after its closing one,
  // where field 3 is index 0, so utime (field 14) and stime (15) are 11 and 12.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) * US_PER_TICK
}
