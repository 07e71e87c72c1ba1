/**
 * The processes the bench starts for the remote column: the worker nodes (`subagent-worker node`)
 * and the BullMQ floor's workers. Each is started and waited for until it prints its ready line,
 * and stopped the way an operator stops a node: SIGTERM, then SIGKILL if it is still there after
 * STOP_GRACE_MS. None is ever left behind: the caller stops them in a `finally`, a SIGINT or
 * SIGTERM to the bench stops them before it exits, and whatever is still running when the bench
 * process exits anyway is killed.
 */
import { spawn, type ChildProcess } from 'node:child_process'

/** How long a process may take to shut down after SIGTERM before it is killed. */
export const STOP_GRACE_MS = 5000

/** Output kept for an error message: the tail is what explains an exit. */
const OUTPUT_KEPT = 16_000

export interface Spawned {
  readonly pid: number
  /** The ready line's match. */
  readonly ready: RegExpExecArray
  /** The tail of what it printed (stdout and stderr). */
  output(): string
  /** SIGTERM, then SIGKILL after STOP_GRACE_MS; resolves once it exited. Idempotent. */
  stop(): Promise<void>
}

const live = new Set<ChildProcess>()
const cleanups = new Set<() => Promise<void>>()
let guarded = false

/** How long the clean-ups after a signal may take before the bench exits anyway. */
const CLEANUP_MS = STOP_GRACE_MS + 3000

/**
 * Runs `cleanup` too when a signal ends the bench (after its processes are stopped): what the
 * interrupted run's `finally` would have done. Returns its removal, for when the run did it itself.
 */
export function onInterrupt(cleanup: () => Promise<void>): () => void {
  guard()
  cleanups.add(cleanup)
  return () => cleanups.delete(cleanup)
}

/** On SIGINT/SIGTERM: every live process stopped and the clean-ups run, then the exit the signal asked for. On exit: any process left is killed. */
function guard(): void {
  if (guarded) return
  guarded = true
  const onSignal = (signal: NodeJS.Signals, code: number) => {
    process.stderr.write(`\nbench: ${signal}, stopping the processes it started\n`)
    const bound = new Promise<void>((resolve) => setTimeout(resolve, CLEANUP_MS).unref())
    const done = (async () => {
      await Promise.allSettled([...live].map((child) => stopChild(child)))
      await Promise.allSettled([...cleanups].map((cleanup) => cleanup()))
    })()
    void Promise.race([done, bound]).finally(() => process.exit(code))
  }
  process.once('SIGINT', () => onSignal('SIGINT', 130))
  process.once('SIGTERM', () => onSignal('SIGTERM', 143))
  process.on('exit', () => {
    for (const child of live) child.kill('SIGKILL')
  })
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null
}

const stopping = new WeakMap<ChildProcess, Promise<void>>()

function stopChild(child: ChildProcess): Promise<void> {
  let stopped = stopping.get(child)
  if (!stopped) {
    stopped = new Promise<void>((resolve) => {
      if (exited(child)) return resolve()
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS)
      child.once('exit', () => {
        clearTimeout(timer)
        resolve()
      })
      child.kill('SIGTERM')
    })
    stopping.set(child, stopped)
  }
  return stopped
}

/**
 * Starts `node argv...` and resolves once a line of its stdout matches `ready`; rejects with what
 * it printed if it exits first or is not ready within `timeoutMs` (then it is stopped).
 */
export function startProcess(what: string, argv: string[], ready: RegExp, timeoutMs = 30_000): Promise<Spawned> {
  guard()
  const child = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'pipe'] })
  live.add(child)
  child.once('exit', () => live.delete(child))
  let output = ''
  let stdout = ''
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-OUTPUT_KEPT)
  }
  // Both pipes are drained for the process's whole life: a full pipe would block its writes.
  child.stdout!.on('data', keep)
  child.stderr!.on('data', keep)
  return new Promise<Spawned>((resolve, reject) => {
    let settled = false
    const fail = (why: string) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      child.stdout!.off('data', onData)
      void stopChild(child).then(() => reject(new Error(`${what} ${why}:\n${output.trim() || '(it printed nothing)'}`)))
    }
    const timer = setTimeout(() => fail(`was not ready within ${timeoutMs} ms`), timeoutMs)
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => fail(`exited (${code ?? signal}) before it was ready`)
    const onData = (chunk: Buffer) => {
      stdout = (stdout + chunk.toString()).slice(-OUTPUT_KEPT)
      const match = ready.exec(stdout)
      if (!match || settled) return
      settled = true
      clearTimeout(timer)
      child.stdout!.off('data', onData)
      child.off('exit', onExit)
      resolve({ pid: child.pid!, ready: match, output: () => output, stop: () => stopChild(child) })
    }
    child.stdout!.on('data', onData)
    child.once('exit', onExit)
    child.once('error', (error) => fail(`could not be started (${error.message})`))
  })
}
