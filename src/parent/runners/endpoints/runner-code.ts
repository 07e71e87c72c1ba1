/**
 * The package's files that runners need. A runner runs the build's bundle of the package
 * (dist/runner/, written by scripts/bundle-runner.mjs), a few files where tsc writes a hundred
 * modules, whose loading one by one was most of a new runner's start. It is started under the
 * condition below, so every import of the package inside it (its own entry's, an agent module's)
 * resolves to the bundle (package.json `exports`), and it holds one copy of each class. The host
 * keeps tsc's files.
 */
import { existsSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { subagentError } from '../../../protocol/errors.js'

export const RUNNER_CONDITION = '--conditions=subagent-worker-runner'

let root: string | undefined

/**
 * The package's folder, found by the package's own name: the same from tsc's files and from the
 * runner's bundle, whose modules sit at another depth under dist/ (a host made inside a runner
 * runs from the bundle).
 */
export function packageRoot(): string {
  return (root ??= dirname(createRequire(import.meta.url).resolve('subagent-worker/package.json')))
}

/** A file of the package's build, by its path under dist/. */
export function distFile(...path: string[]): string {
  return join(packageRoot(), 'dist', ...path)
}

/** Whether the bundle was found once: it is written by the build's last step, which a `tsc` alone skips. */
let bundled = false

/**
 * How much newer than the bundle tsc's file of an entry may be before the bundle counts as built
 * from older files. A package from npm gives every file one time, but a copy made file by file
 * (`cp -r`) writes them apart, by more than a second on a loaded machine, and a false warning
 * would send a user to rebuild a package that is fine: a `tsc` run within the minute after a build
 * goes unnamed instead.
 */
const STALE_AFTER_MS = 60_000

/** A runner entry in the bundle: the worker thread's or the child process's. */
export function runnerEntry(name: 'entry' | 'process-entry'): string {
  const entry = distFile('runner', `${name}.js`)
  if (bundled) return entry
  if (!existsSync(entry)) {
    throw subagentError('ERR_SUBAGENT_ENTRY', `the runner's code is missing (${entry}): the package was built without its last step; build it with \`npm run build\``)
  }
  bundled = true
  warnIfStale(entry, distFile('worker', `${name}.js`))
  return entry
}

/** A `tsc` run alone after a build leaves runners on the code before it: said once, as the host would otherwise run two versions of the package without a sign. */
function warnIfStale(bundle: string, compiled: string): void {
  const compiledAt = statSync(compiled, { throwIfNoEntry: false })?.mtimeMs
  if (compiledAt === undefined || compiledAt <= statSync(bundle).mtimeMs + STALE_AFTER_MS) return
  process.emitWarning(`the runner's code (${bundle}) is older than tsc's files beside it: runners would run the package as it was built before; build it with \`npm run build\``, { code: 'SUBAGENT_STALE_RUNNER_CODE' })
}
