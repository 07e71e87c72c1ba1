/**
 * A fixed amount of integer work. The amount, not the wall time, is what a burning tool is
 * given: a loop that ran "until 50 ms passed" would finish early on an oversubscribed core and
 * flatter the parallel figure. The bench calibrates the iterations for 50 ms on one idle core.
 * Its own file so the floor's worker can use it without loading the library.
 */
export function work(iterations: number): number {
  let x = 1
  for (let i = 0; i < iterations; i++) x = (Math.imul(x, 1103515245) + 12345) | 0
  return x
}

/** Iterations of `work` that take `ms` on this thread, on an idle core (the best of several tries). */
export function calibrate(ms: number): number {
  for (let i = 0; i < 20; i++) work(100_000) // let the loop be optimized before timing it
  let perMs = 0
  let iterations = 1_000_000
  for (let i = 0; i < 7; i++) {
    const t0 = performance.now()
    work(iterations)
    const rate = iterations / (performance.now() - t0)
    perMs = Math.max(perMs, rate)
    iterations = Math.round(rate * ms)
  }
  return Math.round(perMs * ms)
}
