/**
 * The host's handle on one child in a worker thread: the creation round trip, the run, cancel
 * with a grace period, release, the child's RPC calls into host models and tools, and the
 * containment of every way the worker can die. Whatever happens, `created`, `run` and `release`
 * settle: a dead worker, a closed port and a malformed message all become a fault.
 */
import type { MessagePort } from 'node:worker_threads'
import { renderToolValue } from '../agent/tools.js'
import type { ContentBlock } from '../protocol/content.js'
import { cloneableReason, fromWireError, type ChildMessage, type HostMessage, type RpcTarget } from '../protocol/lifecycle.js'
import { RpcServer } from '../protocol/rpc.js'
import type { StreamChunk } from '../protocol/stream.js'
import { isChildMessage } from '../protocol/validators.js'
import type { ChildOutcome } from './result.js'
import type { ChildHandle, ChildMirror } from './transport.js'
import type { HostPlacement } from './worker-transport.js'

export type ChildTermination = NonNullable<ChildOutcome['fault']>

export interface WorkerChildOptions {
  graceMs: number
  placement: HostPlacement
  terminate(child: WorkerChild, termination: ChildTermination): void
  placed(child: WorkerChild, threadId: number): void
  gone(child: WorkerChild): void
}

type Phase = 'creating' | 'created' | 'running' | 'idle' | 'closed'

export class WorkerChild implements ChildHandle {
  readonly #port: MessagePort
  readonly #mirror: ChildMirror
  readonly #options: WorkerChildOptions
  readonly #rpc: RpcServer
  readonly #created = deferred<void>()
  readonly #outcome = deferred<ChildOutcome>()
  readonly #closed = deferred<void>()
  #task: Promise<unknown> = Promise.resolve()
  #phase: Phase = 'creating'
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
      this.#task.then(
        () => this.#die({ stopReason: 'error', diagnostic: "the child's worker closed its channel before the child finished" }),
        (error: unknown) => this.#die(diagnose(error, this.#options)),
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

  attach(task: Promise<unknown>): void {
    this.#task = task
    task.catch((error: unknown) => this.#die(diagnose(error, this.#options)))
  }

  /** Resolves when the worker built the child; on abort, rolls back first, then rejects. */
  async created(signal: AbortSignal): Promise<void> {
    let onAbort = () => {}
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(signal.reason)
      signal.addEventListener('abort', onAbort, { once: true })
    })
    aborted.catch(() => {})
    try {
      await Promise.race([this.#created.promise, aborted])
    } catch (error) {
      if (signal.aborted) await this.rollback()
      throw error
    } finally {
      signal.removeEventListener('abort', onAbort)
    }
  }

  /** Settles the child without its worker (which is unknown or already gone). */
  abandon(termination: ChildTermination): void {
    this.#die(termination)
  }

  /** Marks why this child will die if its worker is terminated on another child's account. */
  doom(termination: ChildTermination): void {
    this.#doomed ??= termination
  }

  publish(): void {
    this.#send({ type: 'publish' })
  }

  async rollback(): Promise<void> {
    await this.#closeGracefully({ type: 'rollback' })
  }

  run(prompt: ContentBlock[]): Promise<ChildOutcome> {
    if (this.#phase === 'created') {
      this.#phase = 'running'
      this.#send({ type: 'run', prompt })
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

  async release(): Promise<void> {
    await this.#closeGracefully({ type: 'dispose' })
  }

  /** Asks the worker to let go; a worker that does not answer within the grace is terminated. */
  async #closeGracefully(message: HostMessage): Promise<void> {
    if (this.#phase === 'closed') return
    this.#send(message)
    const timer = setTimeout(() => {
      this.#options.terminate(this, { stopReason: 'error', diagnostic: `the child's worker did not release it within ${this.#options.graceMs} ms, so it was terminated` })
    }, this.#options.graceMs)
    try {
      await this.#closed.promise
    } finally {
      clearTimeout(timer)
    }
  }

  #receive(raw: unknown): void {
    if (this.#phase === 'closed') return
    if (!isChildMessage(raw)) {
      const shown = safeJson(raw).slice(0, 200)
      this.#die({ stopReason: 'error', diagnostic: `protocol error: the child's worker sent a malformed or unknown message: ${shown}` })
      this.#send({ type: 'dispose' })
      return
    }
    const message = raw as ChildMessage
    switch (message.type) {
      case 'created':
        this.#threadId = message.threadId
        this.#phase = 'created'
        this.#options.placed(this, message.threadId)
        this.#created.resolve()
        return
      case 'create-failed':
        this.#created.reject(fromWireError(message.error))
        return
      case 'events':
        for (const event of message.events) this.#mirror.append(event)
        return
      case 'idle':
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
    this.#phase = 'closed'
    clearTimeout(this.#grace)
    const cause = this.#doomed ?? fault
    this.#rpc.close({ kind: 'worker-gone' })
    this.#created.reject(new Error(cause.diagnostic))
    this.#outcome.resolve({ fault: cause })
    this.#port.close()
    this.#options.gone(this)
    this.#closed.resolve()
  }

  #send(message: HostMessage): void {
    if (this.#phase !== 'closed') this.#port.postMessage(message)
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
    return { text: rendered.content.map((b) => (b.type === 'text' ? b.text : '')).join(''), concluded, ...cloneableValue(rendered.value) }
  }
}

/** Names the cause of a worker's death: exit code, uncaught error, or memory limit. */
function diagnose(error: unknown, options: WorkerChildOptions): ChildTermination {
  const { name = 'Error', message = String(error), code } = (error ?? {}) as { name?: string; message?: string; code?: string }
  if (code === 'ERR_WORKER_OUT_OF_MEMORY') {
    return { stopReason: 'error', diagnostic: `the child's worker thread ran out of memory (its resourceLimits heap cap was reached): ${message}` }
  }
  const exit = /worker exited with code:? (-?\d+)/.exec(message)
  if (exit) return { stopReason: 'error', diagnostic: `the child's worker thread exited with code ${exit[1]} (process.exit was called, or the thread was stopped)` }
  if (name === 'AbortError') return { stopReason: 'aborted', diagnostic: 'the worker pool was closed before the child finished' }
  return { stopReason: 'error', diagnostic: `the child's worker thread crashed with an uncaught ${name}: ${message}` }
}

function cloneableValue(value: unknown): { value?: unknown } {
  if (value === undefined) return {}
  try {
    return { value: structuredClone(value) }
  } catch {
    return {}
  }
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
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
