/**
 * A continuable child's settlements (CONTRACT.md §13): one per activation, in order. Every
 * iterator of `run.settlements` sees every settlement from the first, then each as it comes, and
 * ends once the child is disposed and the last one was yielded.
 */
import type { Settlement } from '../../types.js'

export type { Settlement }

/** The settlements so far, and the readers waiting for the next one. */
export class SettlementLog implements AsyncIterable<Settlement> {
  readonly #settled: Settlement[] = []
  #waiting: Array<() => void> = []
  #ended = false

  get count(): number {
    return this.#settled.length
  }

  push(settlement: Settlement): void {
    if (this.#ended) return
    this.#settled.push(settlement)
    this.#wake()
  }

  /** No settlement follows: readers end after the last one. */
  end(): void {
    this.#ended = true
    this.#wake()
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Settlement> {
    for (let next = 0; ; next++) {
      while (next >= this.#settled.length) {
        if (this.#ended) return
        await new Promise<void>((resolve) => this.#waiting.push(resolve))
      }
      yield this.#settled[next]!
    }
  }

  #wake(): void {
    const waiting = this.#waiting
    this.#waiting = []
    for (const resolve of waiting) resolve()
  }
}
