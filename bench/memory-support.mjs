/** What the memory scripts share: a store that keeps nothing, and a heap read after full collections. */

/** A store that keeps nothing: the memory store would keep every transcript twice over. */
export const discard = {
  async create() {},
  async append() {},
  async read() {
    return undefined
  },
  async list() {
    return { sessions: [], unreadable: [] }
  },
  async delete() {},
}

/** Heap in use after repeated collections (run with --expose-gc). */
export function heap() {
  for (let i = 0; i < 4; i++) globalThis.gc()
  return process.memoryUsage().heapUsed
}
