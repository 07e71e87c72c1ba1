/**
 * The request's own abort signal, plus a watchdog: when the endpoint stays silent for `ms`
 * (before answering, or between two chunks), the request is aborted and `expired` says so.
 */
import { subagentError } from '../../protocol/errors.js'

export class Silence {
  readonly #controller = new AbortController()
  readonly #ms: number
  readonly #parent: AbortSignal
  readonly #onAbort = () => this.#controller.abort(this.#parent.reason)
  #timer: NodeJS.Timeout | undefined
  #heardAt = 0
  expired = false

  constructor(ms: number, parent: AbortSignal) {
    this.#ms = ms
    this.#parent = parent
    if (parent.aborted) this.#onAbort()
    else parent.addEventListener('abort', this.#onAbort, { once: true })
  }

  get signal(): AbortSignal {
    return this.#controller.signal
  }

  /**
   * Notes that the endpoint spoke (and starts the watchdog). One timer serves the whole stream: when
   * it fires it checks the time since the last chunk, and waits again for what is left.
   */
  arm(): void {
    this.#heardAt = performance.now()
    this.#timer ??= setTimeout(this.#check, this.#ms)
  }

  readonly #check = (): void => {
    const silent = performance.now() - this.#heardAt
    if (silent < this.#ms) {
      this.#timer = setTimeout(this.#check, this.#ms - silent)
      return
    }
    this.expired = true
    this.#controller.abort(subagentError('ERR_SUBAGENT_SILENT', 'timeout'))
  }

  dispose(): void {
    clearTimeout(this.#timer)
    this.#parent.removeEventListener('abort', this.#onAbort)
  }
}
