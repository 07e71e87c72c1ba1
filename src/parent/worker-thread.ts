/**
 * One worker thread and the channel to its runner. The thread is ours from start to exit: its
 * 'exit' is the one moment its children are settled, after Node has delivered every frame the
 * thread posted before it died, so nothing a child emitted is lost. Why it ended is decided
 * once: the host's own reason for stopping it, else the crash it reported, else its exit code.
 */
import { Worker, type ResourceLimits } from 'node:worker_threads'
import type { RunnerConfig } from '../protocol/messages.js'
import { messageOf } from '../protocol/values.js'
import { RunnerChannel, type Culprit, type Fault } from './channel.js'

const ENTRY = new URL('../worker/entry.js', import.meta.url)

/** How long a terminated thread may take to exit before its children are settled without it (a native call can block termination). */
const EXIT_WAIT_MS = 1000

export interface ThreadOptions {
  config: RunnerConfig
  resourceLimits: ResourceLimits | undefined
  /** A child left the thread, or the thread is gone: slots changed. */
  changed(thread: WorkerThread): void
  exited(thread: WorkerThread): void
}

export class WorkerThread {
  readonly channel: RunnerChannel
  readonly exit: Promise<void>
  readonly #worker: Worker
  readonly #options: ThreadOptions
  #stopping: { fault: Fault; culprit?: Culprit } | undefined
  #crash: Error | undefined
  #gone = false
  /** Settles the children if a terminated thread never reports its exit. */
  #exitWait: NodeJS.Timeout | undefined
  #markExited!: () => void
  #referenced = false

  constructor(options: ThreadOptions) {
    this.#options = options
    this.#worker = new Worker(ENTRY, options.resourceLimits ? { resourceLimits: options.resourceLimits } : {})
    const worker = this.#worker
    this.exit = new Promise((resolve) => (this.#markExited = resolve))
    this.channel = new RunnerChannel({
      label: `worker thread ${worker.threadId}`,
      config: options.config,
      send: (frame) => worker.postMessage(frame),
      kill: (fault, culprit) => this.stop(fault, culprit),
      changed: () => {
        this.#reference()
        options.changed(this)
      },
    })
    worker.on('message', (frame: unknown) => this.channel.receive(frame))
    worker.on('messageerror', (error: Error) => {
      // The frame is lost whole: every child on this thread has a gap in its record.
      this.stop({ stopReason: 'error', diagnostic: `protocol error: a frame from the ${this.channel.label} could not be read (${error.message}), so it was stopped` })
    })
    worker.on('error', (error: Error) => void (this.#crash ??= error))
    worker.on('exit', (code: number) => this.#exited(code))
    // An idle thread never keeps the process alive; one with children does (see #reference).
    worker.unref()
  }

  get threadId(): number {
    return this.#worker.threadId
  }

  get stopping(): boolean {
    return this.#stopping !== undefined || this.#gone
  }

  /** Terminates the thread; its children end with `fault` (the culprit with its own) once it exited. */
  stop(fault: Fault, culprit?: Culprit): void {
    if (this.#stopping || this.#gone) return
    this.#stopping = culprit ? { fault, culprit } : { fault }
    void this.#worker.terminate()
    this.#exitWait = setTimeout(() => this.#exited(undefined), EXIT_WAIT_MS).unref()
  }

  #exited(code: number | undefined): void {
    if (this.#gone) return
    this.#gone = true
    clearTimeout(this.#exitWait)
    const fault = this.#stopping?.fault ?? (this.#crash ? crashFault(this.#crash) : exitFault(code))
    this.channel.end(fault, this.#stopping?.culprit)
    this.#worker.unref()
    this.#markExited()
    this.#options.exited(this)
  }

  /** Keeps the process alive while the thread has children: a caller may be awaiting one. */
  #reference(): void {
    const wanted = this.channel.load > 0 && !this.#gone
    if (wanted === this.#referenced) return
    this.#referenced = wanted
    if (wanted) this.#worker.ref()
    else this.#worker.unref()
  }
}

/** Names the cause of a thread's death from the error it reported: memory limit, or uncaught error. */
function crashFault(error: Error): Fault {
  const { name = 'Error', code } = error as Error & { code?: unknown }
  if (code === 'ERR_WORKER_OUT_OF_MEMORY') {
    return { stopReason: 'error', diagnostic: `the child's worker thread ran out of memory (its resourceLimits heap cap was reached): ${error.message}` }
  }
  return { stopReason: 'error', diagnostic: `the child's worker thread crashed with an uncaught ${name}: ${messageOf(error)}` }
}

function exitFault(code: number | undefined): Fault {
  if (code === undefined) return { stopReason: 'error', diagnostic: "the child's worker thread could not be stopped and was abandoned" }
  return { stopReason: 'error', diagnostic: `the child's worker thread exited with code ${code} (process.exit was called on that thread, or it was terminated)` }
}
