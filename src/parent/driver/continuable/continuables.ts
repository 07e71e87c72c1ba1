/**
 * The host's live continuable children by id, with the agent that started each: what
 * `send_message` looks a child up in (CONTRACT.md §13: a caller may message only children it
 * started; an unknown, foreign or disposed id is refused, saying which). A disposed child leaves
 * only its id and its parent's behind, so the refusal can say "disposed" rather than "unknown".
 */
import type { ContinuableChild } from './continuable.js'

export type ContinuableLookup =
  | { kind: 'live'; run: ContinuableChild; parentId: string }
  | { kind: 'disposed'; parentId: string }

export class Continuables {
  readonly #live = new Map<string, { run: ContinuableChild; parentId: string }>()
  readonly #disposed = new Map<string, string>()

  add(run: ContinuableChild, parentId: string): void {
    this.#live.set(run.id, { run, parentId })
  }

  /** The child was disposed: it is remembered as such, and no longer reachable. */
  retire(id: string): void {
    const entry = this.#live.get(id)
    if (!entry) return
    this.#live.delete(id)
    this.#disposed.set(id, entry.parentId)
  }

  lookup(id: string): ContinuableLookup | undefined {
    const live = this.#live.get(id)
    if (live) return { kind: 'live', run: live.run, parentId: live.parentId }
    const parentId = this.#disposed.get(id)
    return parentId === undefined ? undefined : { kind: 'disposed', parentId }
  }

  /** The live children `parentId` started. */
  startedBy(parentId: string): ContinuableChild[] {
    if (this.#live.size === 0) return [] // every one-shot child's dispose asks
    return [...this.#live.values()].flatMap((entry) => (entry.parentId === parentId ? [entry.run] : []))
  }

  /** Live children, for the host's close. */
  runs(): ContinuableChild[] {
    return [...this.#live.values()].map(({ run }) => run)
  }
}

const registries = new WeakMap<object, Continuables>()

/** Ties a host to its registry; called once, by createHost. */
export function attachContinuables(host: object, registry: Continuables): void {
  registries.set(host, registry)
}

/** The continuable children of a host made by createHost; undefined for any other object. */
export function continuablesOf(host: object): Continuables | undefined {
  return registries.get(host)
}
