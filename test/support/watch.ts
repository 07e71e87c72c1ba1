/**
 * How a test waits for a state it observes (requests a model got, lifecycle events, messages
 * heard on Redis): the state is checked when the wait begins and again after each change, so a
 * change that came before the wait is never missed, and nothing is polled.
 */
import { existsSync, watch } from 'node:fs'
import { basename, dirname } from 'node:path'

/** Far past any honest wait on a loaded machine: only a hang meets it, and it then fails naming what never came. */
const HANG_MS = 30_000

export class Watch {
  readonly #checks = new Set<() => void>()

  /** Resolves once `holds()` is true, now or after a later `changed()`; fails naming `what` if that never comes. */
  until(what: string, holds: () => boolean): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#checks.delete(check)
        reject(new Error(`no ${what} within ${HANG_MS / 1000} s`))
      }, HANG_MS).unref()
      const check = () => {
        if (!holds()) return
        this.#checks.delete(check)
        clearTimeout(timer)
        resolve()
      }
      this.#checks.add(check)
      check()
    })
  }

  /** The observed state changed: waits whose condition now holds resolve. */
  changed(): void {
    for (const check of [...this.#checks]) check()
  }
}

/** Resolves once `file` exists (a fixture's marker): a watch on its folder, set up before `act` runs, so its creation cannot be missed. */
export function fileAppears(file: string, act: () => void = () => {}): Promise<void> {
  return new Promise((resolve) => {
    const watcher = watch(dirname(file), (_event, name) => {
      if (name === basename(file) || existsSync(file)) (watcher.close(), resolve())
    })
    act()
    if (existsSync(file)) (watcher.close(), resolve())
  })
}
