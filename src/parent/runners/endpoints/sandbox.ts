/**
 * The `process` transport's sandbox: the Node flags a child process starts with. Node's permission
 * model denies the file system, child processes, worker threads, native addons, WASI and the
 * inspector unless a flag grants them; the host grants only what `sandbox` lists, plus reading
 * the code a runner must load (this package, its dependencies and the agent module).
 *
 * Node calls its permission model a seat belt: it keeps trusted and model-driven code from
 * touching what it was not granted, not a determined attacker, and before Node 25 it does not
 * restrict the network. Two gaps it leaves, which the README states: it follows a symbolic link
 * inside a granted folder wherever it leads, and it does not cover signals (a child can signal
 * any process of its user, the host included).
 */
import { existsSync, readdirSync, readFileSync, realpathSync } from 'node:fs'
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { ResourceLimits } from 'node:worker_threads'
import { InvalidOptionError } from '../../options.js'
import { packageRoot } from './runner-code.js'

export interface SandboxOptions {
  /** Absolute paths (files, or folders and all below them) a child may read, beyond its own code. */
  fsRead?: Array<string | URL>
  /** Absolute paths a child may write. */
  fsWrite?: Array<string | URL>
  /** May a child start processes; default false. */
  childProcess?: boolean
  /** May a child start worker threads; default false. */
  worker?: boolean
  /** May a child load native addons; default false. */
  addons?: boolean
}

const SANDBOX_KEYS = new Set(['fsRead', 'fsWrite', 'childProcess', 'worker', 'addons'])

export function checkSandbox(sandbox: SandboxOptions): SandboxOptions {
  if (typeof sandbox !== 'object' || sandbox === null || Array.isArray(sandbox)) throw new InvalidOptionError('sandbox', sandbox, 'an object')
  for (const [key, value] of Object.entries(sandbox)) {
    if (!SANDBOX_KEYS.has(key)) throw new InvalidOptionError(`sandbox.${key}`, value, `a known sandbox option (${[...SANDBOX_KEYS].join(', ')})`)
    if (key === 'fsRead' || key === 'fsWrite') paths(`sandbox.${key}`, value)
    else if (typeof value !== 'boolean') throw new InvalidOptionError(`sandbox.${key}`, value, 'true or false')
  }
  return { ...sandbox }
}

/** The flags a child process starts with: the permission model with its grants, and the heap caps. */
export function processFlags(sandbox: SandboxOptions, agentModule: URL | undefined, limits: ResourceLimits | undefined): string[] {
  const flags = [...permissionFlags()]
  const reads = new Set([...runnerCode(), ...grants('sandbox.fsRead', sandbox.fsRead ?? [])])
  if (agentModule?.protocol === 'file:') reads.add(fileURLToPath(agentModule))
  for (const path of reads) flags.push(`--allow-fs-read=${path}`)
  for (const path of grants('sandbox.fsWrite', sandbox.fsWrite ?? [])) flags.push(`--allow-fs-write=${path}`)
  if (sandbox.childProcess) flags.push('--allow-child-process')
  if (sandbox.worker) flags.push('--allow-worker')
  if (sandbox.addons) flags.push('--allow-addons')
  // Node warns on every start that these grants can undo the model; the host's author chose them (the README says what they cost).
  if (sandbox.childProcess || sandbox.worker || sandbox.addons) flags.push('--disable-warning=SecurityWarning')
  if (limits?.maxOldGenerationSizeMb !== undefined) flags.push(`--max-old-space-size=${Math.ceil(limits.maxOldGenerationSizeMb)}`)
  // V8's young generation is three semi-spaces.
  if (limits?.maxYoungGenerationSizeMb !== undefined) flags.push(`--max-semi-space-size=${Math.max(1, Math.ceil(limits.maxYoungGenerationSizeMb / 3))}`)
  return flags
}

/** `--permission` since Node 22.13 (stable); `--experimental-permission` before, with its warning silenced. */
export function permissionFlags(): string[] {
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number)
  if (major > 22 || (major === 22 && minor >= 13)) return ['--permission']
  return ['--experimental-permission', '--disable-warning=ExperimentalWarning']
}

function paths(option: string, value: unknown): string[] {
  if (!Array.isArray(value)) throw new InvalidOptionError(option, value, 'a list of absolute paths')
  return value.map((entry: unknown) => {
    const path = entry instanceof URL ? fileURLToPath(entry) : entry
    if (typeof path !== 'string' || !isAbsolute(path)) throw new InvalidOptionError(option, entry, 'a list of absolute paths (or file: URLs)')
    // One spelling per path: Node 20 aborts on a path given both with and without its trailing slash.
    return resolve(path)
  })
}

/**
 * A grant's paths as Node must be given them: the path as written and, when links lead
 * elsewhere, its real path too. Node checks the path an access names, unresolved, while the
 * module loader and process.cwd() name real paths, so a grant through a link (a linked package,
 * a /tmp that is a link) would otherwise deny its own files. A granted folder with a top-level
 * entry linking out of it is warned about: Node would follow it.
 */
function grants(option: string, value: unknown): string[] {
  const out = new Set<string>()
  for (const path of paths(option, value)) {
    const real = realPath(path)
    out.add(path).add(real)
    warnLinksOut(option, path, real)
  }
  return [...out]
}

/** The real path; for a path not there yet (a folder a child will create), its nearest existing ancestor's, resolved, with the rest. */
function realPath(path: string): string {
  try {
    return realpathSync(path)
  } catch {
    const parent = dirname(path)
    return parent === path ? path : join(realPath(parent), basename(path))
  }
}

/** The warning's code, for process.on('warning') filters and --disable-warning. */
const LINK_OUT_WARNING = 'SUBAGENT_WORKER_SANDBOX_LINK_OUT'

/**
 * Warns when a granted folder's own entries link out of it. Only the top level is looked at (one
 * directory read a grant, when the host is created): a link deeper down still escapes unwarned.
 */
function warnLinksOut(option: string, path: string, real: string): void {
  let entries
  try {
    entries = readdirSync(real, { withFileTypes: true })
  } catch {
    return // a file, or not there yet: nothing below it to link out
  }
  const out: string[] = []
  for (const entry of entries) {
    if (!entry.isSymbolicLink()) continue
    let target: string
    try {
      target = realpathSync(join(real, entry.name))
    } catch {
      continue // a dangling link reaches nothing
    }
    const inside = relative(real, target)
    if (inside === '..' || inside.startsWith(`..${sep}`) || isAbsolute(inside)) out.push(`${entry.name} -> ${target}`)
  }
  if (out.length === 0) return
  process.emitWarning(
    `${option} grants ${path}, and links in it lead outside it (${out.join(', ')}): Node follows them, so a child may reach there too. Remove the links or grant a narrower folder`,
    { code: LINK_OUT_WARNING },
  )
}

let code: string[] | undefined

/**
 * What a runner loads: this package and its dependencies, each package's folder (and the real
 * folder behind a link, as pnpm lays them out), found as Node resolves them.
 */
function runnerCode(): string[] {
  if (code) return code
  const found = new Set<string>()
  const visit = (root: string): void => {
    const real = realpathSync(root)
    if (found.has(real)) return
    found.add(root).add(real)
    const manifest = JSON.parse(readFileSync(join(real, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> }
    for (const name of Object.keys(manifest.dependencies ?? {})) {
      const dependency = installed(real, name)
      if (dependency) visit(dependency)
    }
  }
  visit(packageRoot())
  return (code = [...found])
}

/** Where Node finds package `name` from `from`: the nearest node_modules folder up the tree that has it. */
function installed(from: string, name: string): string | undefined {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name)
    if (existsSync(join(candidate, 'package.json'))) return candidate
    if (dirname(dir) === dir) return undefined
  }
}
