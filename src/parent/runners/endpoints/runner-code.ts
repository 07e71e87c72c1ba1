/**
 * The code a runner runs: the build's bundle of the package (dist/runner/, written by
 * scripts/bundle-runner.mjs), a few files where tsc writes a hundred modules, whose loading one by
 * one was most of a new runner's start. A runner is started under the condition below, so every
 * import of the package inside it (its own entry's, an agent module's) resolves to the bundle
 * (package.json `exports`), and it holds one copy of each class. The host keeps tsc's files.
 */
export const RUNNER_CONDITION = '--conditions=subagent-worker-runner'

/** A runner entry in the bundle: the worker thread's or the child process's. */
export function runnerEntry(name: 'entry' | 'process-entry'): URL {
  return new URL(`../../../runner/${name}.js`, import.meta.url)
}
