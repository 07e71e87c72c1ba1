/**
 * What a transport costs the machine: the host process (every thread, which covers inline
 * children and worker threads) plus, for the process transport, its runner processes, and for
 * the remote transport its worker node processes, which the host's own process.cpuUsage and
 * process.memoryUsage cannot see. A `null` reading means the runners could not be read here (see
 * proc.ts): a figure without them would flatter the transport. The Redis server's CPU is read
 * apart (otherCpuMeter): it serves the remote transport, but it is not the library's.
 */
import { cpuUs, PROC_AVAILABLE, rssBytes } from './proc.js'

/** Whole-process CPU time (user + system, every thread) since `since`, in µs. */
export function cpuSince(since: NodeJS.CpuUsage): number {
  const { user, system } = process.cpuUsage(since)
  return user + system
}

export interface CpuMeter {
  /** CPU time since the meter started, in µs: the host's and the runners'. */
  stop(): number | null
}

/** Starts counting the host's CPU and that of `runners` (their pids; none for inline and worker). */
export function cpuMeter(runners: readonly number[]): CpuMeter {
  const readable = runners.length === 0 || PROC_AVAILABLE
  const sum = () => runners.reduce((total, pid) => total + cpuUs(pid), 0)
  const host0 = process.cpuUsage()
  const runners0 = readable ? sum() : 0
  return {
    stop() {
      const host = cpuSince(host0)
      return readable ? host + sum() - runners0 : null
    },
  }
}

/** Counts the CPU of other processes alone (the Redis server), in µs; `null` when /proc cannot be read. */
export function otherCpuMeter(pids: readonly number[]): CpuMeter {
  if (!PROC_AVAILABLE || pids.length === 0) return { stop: () => null }
  const sum = () => {
    try {
      return pids.reduce((total, pid) => total + cpuUs(pid), 0)
    } catch {
      return null // the process is gone
    }
  }
  const start = sum()
  return {
    stop() {
      const end = sum()
      return start === null || end === null ? null : end - start
    },
  }
}

/** The runners' resident memory together, in bytes; 0 when there are none. */
export function runnersRss(runners: readonly number[]): number | null {
  if (runners.length === 0) return 0
  return PROC_AVAILABLE ? runners.reduce((total, pid) => total + rssBytes(pid), 0) : null
}
