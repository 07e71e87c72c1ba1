/**
 * A counting semaphore whose waiters can give up: `acquire` waits (first come, first served) until
 * one of `size` slots is free, or rejects with the signal's reason if it aborts first.
 */
export class Slots {
  readonly #size: number
  #taken = 0
  readonly #waiting: Array<() => void> = []

  constructor(size: number) {
    this.#size = size
  }

  /** Resolves with the slot's release (call it once); an abort while waiting leaves the queue. */
  acquire(signal: AbortSignal): Promise<() => void> {
    if (signal.aborted) return Promise.reject(signal.reason)
    if (this.#taken < this.#size) {
      this.#taken++
      return Promise.resolve(this.#releaser())
    }
    return new Promise((resolve, reject) => {
      const wake = () => {
        signal.removeEventListener('abort', onAbort)
        this.#taken++
        resolve(this.#releaser())
      }
      const onAbort = () => {
        const index = this.#waiting.indexOf(wake)
        if (index >= 0) this.#waiting.splice(index, 1)
        reject(signal.reason)
      }
      signal.addEventListener('abort', onAbort, { once: true })
      this.#waiting.push(wake)
    })
  }

  #releaser(): () => void {
    let released = false
    return () => {
      if (released) return
      released = true
      this.#taken--
      this.#waiting.shift()?.()
    }
  }
}
