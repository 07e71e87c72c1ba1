/**
 * Calls of one turn sent to Redis together: the starts of one turn (a wave of delegations, or
 * the lanes a frame of results frees) as one `addBulk`, the takes a node's frame carries as one
 * transaction, each one pipelined write and one reply instead of a round trip per call. Redis
 * runs the same commands; what is saved is writes on both ends. A batch goes out once the
 * callback that made its first call and the promise jobs it started have run (process.nextTick
 * runs after them), so a lone call waits no longer than that: no timer, no loop turn. A batch
 * that fails fails every call in it: a Redis that did not answer one did not answer the others.
 */
interface Pending<I, O> {
  item: I
  done(value: O): void
  failed(error: unknown): void
}

export class TurnBatch<I, O> {
  readonly #send: (items: I[]) => Promise<O[]>
  #pending: Array<Pending<I, O>> = []

  /** `send` answers each item of a batch, in order; when it rejects, every call of the batch does. */
  constructor(send: (items: I[]) => Promise<O[]>) {
    this.#send = send
  }

  call(item: I): Promise<O> {
    if (this.#pending.length === 0) process.nextTick(() => void this.#flush())
    return new Promise((done, failed) => this.#pending.push({ item, done, failed }))
  }

  async #flush(): Promise<void> {
    const batch = this.#pending
    this.#pending = []
    try {
      const answers = await this.#send(batch.map(({ item }) => item))
      batch.forEach((pending, i) => pending.done(answers[i]!))
    } catch (error) {
      for (const pending of batch) pending.failed(error)
    }
  }
}
