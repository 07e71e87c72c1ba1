/**
 * A runner's scheduling priority: the host's nice value plus `pool.niceIncrement`, so that when
 * runners and the host's thread want the same cores, the runners yield (every child waits on the
 * host's thread). Lowering one's own priority needs no privilege.
 */
import { getPriority, setPriority } from 'node:os'
import { messageOf } from '../../../protocol/errors.js'

/** The lowest priority a nice value names. */
export const MAX_NICE = 19

/** The nice value of a runner `increment` lower than the calling thread; undefined when it is the same. */
export function runnerNice(increment: number): number | undefined {
  return increment === 0 ? undefined : Math.min(MAX_NICE, getPriority() + increment)
}

/**
 * What a new worker thread sets itself to. Only Linux keeps a nice value per thread; elsewhere
 * setting it from a thread would lower the host's whole process, so threads stay as they are.
 */
export function threadNice(increment: number): number | undefined {
  return process.platform === 'linux' ? runnerNice(increment) : undefined
}

/** The warning a runner left at the host's priority gives (setpriority refused, as a seccomp policy may). */
const NICE_REFUSED_WARNING = 'SUBAGENT_NICE_REFUSED'

/**
 * Lowers a just-started child process (its main thread on Linux, where its children run; the
 * whole process elsewhere). A process already gone has nothing to lower: its exit is reported
 * as any other. A refusal leaves it running at the host's priority, with a warning: the pool
 * must not lose track of a process it started.
 */
export function lowerProcess(pid: number, increment: number): void {
  const nice = runnerNice(increment)
  if (nice === undefined) return
  try {
    setPriority(pid, nice)
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ESRCH') return
    process.emitWarning(`pool.niceIncrement: child process ${pid} stays at the host's priority (${messageOf(error)})`, { code: NICE_REFUSED_WARNING })
  }
}
