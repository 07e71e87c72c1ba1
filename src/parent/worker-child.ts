/**
 * The host's handle on one child in a worker thread: the creation round trip, the run, cancel
 * with a grace period, release, the child's RPC calls into host models and tools, and the
 * containment of every way the worker can die. Whatever happens, `created`, `run` and `release`
 * settle: a dead worker, a closed port and a malformed message all become a fault.
 */
import { receiveMessageOnPort, type MessagePort } from 'node:worker_threads'
import { renderToolValue } from '../agent/tools.js'
import { textOf, type ContentBlock } from '../protocol/content.js'
import { cloneableReason, describeShape, fromWireError, tryClone, type ChildMessage, type HostMessage, type RpcTarget } from '../protocol/lifecycle.js'
import { RpcServer } from '../protocol/rpc.js'
import type { StreamChunk } from '../protocol/stream.js'
import { isChildMessage, isStreamChunk } from '../protocol/validators.js'
import type { ChildOutcome } from './result.js'
import type { ChildHandle, ChildMirror } from './transport.js'
import type { Placement } from './types.js'

export type ChildTermination = NonNullable<ChildOutcome['fault']>

export interface WorkerChildOptions {
  graceMs: number
  /** This child's snapshot of the host-placed models and tools. */
  placement: Placement
  /** Terminates the child's thread; false when its thread is unknown (the child was then settled as is). */
  terminate(child: WorkerChild, termination: ChildTermination): boolean
  placed(child: WorkerChild, threadId: number): void
  /** True once the host is closing: a dying worker is then the pool being stopped. */
  closing(): boolean
}

type Phase = 'creating' | 'created' | 'running' | 'idle' | 'closed'

/** Building a child is quick (the module is imported once per thread); this only catches a stuck thread. */
const CREATE_TIMEOUT_MS = 30_000

/** The phases in which each message from the worker is legal; anything else is a protocol error. */
const LEGAL: Record<ChildMessage['type'], readonly Phase[]> = {
  created: ['creating'],
  'create-failed': ['creating'],
  events: ['running'],
  idle: ['running'],
  'rpc/call': ['running'],
  'rpc/abort': ['running', 'idle'],
}

export class WorkerChild implements ChildHandle {
  readonly #port: MessagePort
  readonly #mirror: ChildMirror
  readonly #options: WorkerChildOptions
  readonly #rpc: RpcServer
  readonly #created = deferred<void>()
  readonly #outcome = deferred<ChildOutcome>()
  #task: Promise<unknown> = Promise.resolve()
  #phase: Phase = 'creating'
  #createdPending = true
  /** Once the port emitted 'close', every message was delivered; reading it then can crash Node 20 (SIGSEGV). */
  #portClosed = false
  #draining = false
  #taskSettled = false
  #forfeit = () => {}
  #threadId: number | undefined
  #doomed: ChildTermination | undefined
  #grace: NodeJS.Timeout | undefined

  constructor(port: MessagePort, mirror: ChildMirror, options: WorkerChildOptions) {
    this.#port = port
    this.#mirror = mirror
    this.#options = options
    this.#rpc = new RpcServer((message) => this.#send(message), (target, name, payload, context) => this.#serve(target, name, payload, context))
    port.on('message', (message: unknown) => this.#receive(message))
    // The port closes when the worker dies; the task's rejection says why, so wait for it.
    port.on('close', () => {
      this.#portClosed = true
      this.#task.then(
        () => this.#die({ stopReason: 'error', diagnostic: "the child's worker closed its channel before the child finished" }),
        (error: unknown) => this.#die(this.#diagnose(error)),
      )
    })
    this.#created.promise.catch(() => {})
  }

  get id(): string {
    return this.#mirror.view.id
  }

  get threadId(): number | undefined {
    return this.#threadId
  }

  /** `forfeit` frees the child's pool slot without the task (whose thread could not be stopped). */
  attach(task: Promise<unknown>, forfeit: () => void): void {
    this.#task = task
    this.#forfeit = forfeit
    const settled = () => void (this.#taskSettled = true)
    task.then(settled, settled)
    task.catch((error: unknown) => this.#die(this.#diagnose(error)))
  }

  /**
   * The task's failure can overtake the messages the worker sent just before it died: take those
   * off the port first, so nothing it emitted is lost.
   */
  #drain(): void {
    if (this.#portClosed || this.#draining) return
    this.#draining = true
    for (let next = receiveMessageOnPort(this.#port); next && this.#phase !== 'closed'; next = receiveMessageOnPort(this.#port)) this.#receive(next.message)
  }

  /** Resolves when the worker built the child; on abort, rolls back first, then rejects. */
  async created(signal: AbortSignal): Promise<void> {
    let onAbort = () => {}
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(signal.reason)
      if (signal.aborted) onAbort()
      else signal.addEventListener('abort', onAbort, { once: true })
    })
    aborted.catch(() => {})
    // A thread that never answers (say, left spinning by an earlier child) must not hold start() forever.
    const watchdog = setTimeout(() => {
      const stuck = { stopReason: 'error' as const, diagnostic: `the child's worker did not build it within ${CREATE_TIMEOUT_MS} ms` }
      if (!this.#options.terminate(this, stuck)) this.#forfeit()
    }, CREATE_TIMEOUT_MS)
    try {
      await Promise.race([this.#created.promise, aborted])
    } catch (error) {
      if (signal.aborted) await this.rollback()
      throw error
    } finally {
      clearTimeout(watchdog)
      signal.removeEventListener('abort', onAbort)
    }
  }

  /** Marks why this child will die if its worker is terminated on another child's account. */
  doom(termination: ChildTermination): void {
    this.#doomed ??= termination
  }

  /** Settles the child without its worker (which is unknown or already gone). */
  abandon(termination: ChildTermination): void {
    this.#die(termination)
  }

  rollback(): Promise<void> {
    return this.#let({ type: 'rollback' })
  }

  run(prompt: ContentBlock[]): Promise<ChildOutcome> {
    if (this.#phase === 'created') {
      this.#phase = 'running'
      // The worker learns of its publication together with the work: one crossing, not two.
      this.#send({ type: 'publish', prompt })
    }
    return this.#outcome.promise
  }

  cancel(reason: unknown): void {
    if (this.#phase !== 'running' || this.#grace) return
    this.#send({ type: 'abort', reason: cloneableReason(reason) })
    this.#grace = setTimeout(() => {
      this.#options.terminate(this, {
        stopReason: 'aborted',
        diagnostic: `the child did not stop within abortGraceMs (${this.#options.graceMs} ms) of being cancelled, so its worker thread was terminated`,
      })
    }, this.#options.graceMs)
  }

  release(): Promise<void> {
    return this.#let({ type: 'dispose' })
  }

  /**
   * Lets go of the child: closing our end tells the worker, even one busy with another child.
   * If this child's task still runs, its slot is only free once the task ends, so wait for that,
   * and terminate the thread if it does not end within the grace (it is stuck). A task that
   * already ended is never waited on, so a thread another child took is never disturbed.
   */
  async #let(message: HostMessage): Promise<void> {
    this.#send(message)
    this.#die({ stopReason: 'aborted', diagnostic: 'the child was released' })
    if (this.#taskSettled) return
    let giveUp = () => {}
    const gaveUp = new Promise<void>((resolve) => (giveUp = resolve))
    const watchdog = setTimeout(() => {
      const termination = { stopReason: 'aborted' as const, diagnostic: `the child's worker did not let it go within ${this.#options.graceMs} ms, so its thread was terminated` }
      // An unknown thread cannot be stopped: give its slot up rather than hang every later start.
      if (!this.#options.terminate(this, termination)) {
        this.#forfeit()
        giveUp()
      }
    }, this.#options.graceMs)
    await Promise.race([this.#task.catch(() => {}), gaveUp])
    clearTimeout(watchdog)
  }

  #receive(raw: unknown): void {
    if (this.#phase === 'closed') return
    const message = raw as ChildMessage
    if (!isChildMessage(raw) || !LEGAL[message.type].includes(this.#phase)) {
      const why = isChildMessage(raw) ? `a '${message.type}' message while ${this.#phase}` : `a malformed or unknown message ${describeShape(raw)}`
      this.#die({ stopReason: 'error', diagnostic: `protocol error: the child's worker sent ${why}` })
      return
    }
    switch (message.type) {
      case 'created':
        this.#threadId = message.threadId
        this.#phase = 'created'
        this.#options.placed(this, message.threadId)
        this.#createdPending = false
        this.#created.resolve()
        return
      case 'create-failed':
        this.#createdPending = false
        this.#created.reject(fromWireError(message.error))
        return
      case 'events':
        for (const event of message.events) this.#mirror.append(event)
        return
      case 'idle':
        for (const event of message.events ?? []) this.#mirror.append(event)
        this.#phase = 'idle'
        clearTimeout(this.#grace)
        this.#outcome.resolve(message.structured ? { structured: message.structured } : {})
        return
      default:
        this.#rpc.receive(message)
    }
  }

  #die(fault: ChildTermination): void {
    if (this.#phase === 'closed') return
    this.#drain()
    if ((this.#phase as Phase) === 'closed') return // a drained message was a protocol error
    this.#phase = 'closed'
    clearTimeout(this.#grace)
    const cause = this.#doomed ?? fault
    this.#rpc.close({ kind: 'worker-gone' })
    if (this.#createdPending) this.#created.reject(new Error(cause.diagnostic))
    this.#outcome.resolve({ fault: cause })
    this.#port.close()
  }

  #send(message: HostMessage): void {
    if (this.#phase !== 'closed') this.#port.postMessage(message)
  }

  #diagnose(error: unknown): ChildTermination {
    if (this.#options.closing()) return { stopReason: 'aborted', diagnostic: 'the host was closed before the child finished' }
    return diagnose(error)
  }

  /** Calls from the child into host-placed models and tools. */
  async #serve(target: RpcTarget, name: string, payload: unknown, context: { signal: AbortSignal; emit(chunk: StreamChunk): void }): Promise<unknown> {
    const { signal, emit } = context
    if (target === 'model') {
      const model = this.#options.placement.models.get(name)
      if (!model) throw new Error(`no host model is registered under "${name}"`)
      const request = payload as { model: string; messages: [] }
      if (typeof request !== 'object' || request === null || !Array.isArray(request.messages)) throw new TypeError('malformed model request')
      for await (const chunk of model.stream({ ...request, signal })) {
        if (signal.aborted) break
        // Checked here, as the inline loop does, so the child gets the same error either way.
        if (!isStreamChunk(chunk)) throw new Error(`the model emitted a malformed stream chunk ${describeShape(chunk)}`)
        emit(chunk)
      }
      return undefined
    }
    const tool = this.#options.placement.tools.get(name)
    if (!tool) throw new Error(`no host tool is registered under "${name}"`)
    const { args, callId } = payload as { args: Record<string, unknown>; callId: string }
    let concluded = false
    const value = await tool.execute(args, { agent: this.#mirror.view, callId, signal, concludeTurn: () => void (concluded = true) })
    const rendered = renderToolValue(tool, value)
    const clone = rendered.value === undefined ? undefined : tryClone(rendered.value)
    return { text: textOf(rendered.content), concluded, ...(clone ? { value: clone.value } : {}) }
  }
}

/** Names the cause of a worker's death: exit code, uncaught error, or memory limit. */
function diagnose(error: unknown): ChildTermination {
  const { name = 'Error', message = String(error), code } = (error ?? {}) as { name?: string; message?: string; code?: string }
  if (code === 'ERR_WORKER_OUT_OF_MEMORY') {
    return { stopReason: 'error', diagnostic: `the child's worker thread ran out of memory (its resourceLimits heap cap was reached): ${message}` }
  }
  const exit = /worker exited with code:? (-?\d+)/.exec(message)
  if (exit) return { stopReason: 'error', diagnostic: `the child's worker thread exited with code ${exit[1]} (process.exit was called on that thread, or it was terminated)` }
  return { stopReason: 'error', diagnostic: `the child's worker thread crashed with an uncaught ${name}: ${message}` }
}

function deferred<T>() {
  let resolve!: (value: T) => void
  let reject!: (error: unknown) => void
  const promise = new Promise<T>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}
