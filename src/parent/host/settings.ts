/**
 * Host options, checked and filled in one place, before anything starts: a wrong value or an
 * unknown key is an InvalidOptionError naming the option, the value and what it may be.
 */
import { availableParallelism } from 'node:os'
import { isAbsolute } from 'node:path'
import type { ResourceLimits } from 'node:worker_threads'
import { agentModuleUrl } from '../../agent/module-loader.js'
import { checkLimits, type ChildLimits } from '../driver/limits.js'
import { integerOption, InvalidOptionError, MAX_TIMER_MS } from '../options.js'
import { checkSandbox, type SandboxOptions } from '../runners/endpoints/sandbox.js'
import { createMemoryStore, type SessionStore } from '../driver/stores/store.js'
import type { Transport } from '../transport.js'
import { ENDPOINTS, isEndpointIsolation, type EndpointIsolation } from '../runners/endpoints/table.js'
import { MAX_NICE } from '../runners/endpoints/priority.js'
import { DEFAULT_LOAD_TIMEOUT_MS, type PoolSettings } from '../runners/runner-pool.js'
import { DEFAULT_ABORT_GRACE_MS } from '../runners/grace.js'
import type { PoolOptions } from '../types.js'

export type Isolation = 'inline' | EndpointIsolation

/** As the error names them: the default, inline, then the other endpoints in table order. */
const ISOLATIONS = ['worker', 'inline', ...Object.keys(ENDPOINTS).filter((name) => name !== 'worker')]

export interface HostOptions {
  /** Where children run: 'worker' (default), 'inline' (the host's thread) or 'process' (a sandboxed child process). */
  isolation?: Isolation
  /** Instead of isolation: children run elsewhere, e.g. `bullmqTransport(...)` from 'subagent-worker/bullmq'. */
  transport?: Transport
  /** ESM module (default export from defineAgentModule) with models, tools and hooks. */
  agentModule?: string | URL
  pool?: PoolOptions
  /** What children may touch with isolation 'process' (Node's permission model); deny by default. */
  sandbox?: SandboxOptions
  /** Cooperative cancel budget before a stuck runner is stopped; default DEFAULT_ABORT_GRACE_MS (2000). */
  abortGraceMs?: number
  store?: SessionStore
  /** Deployment persona; a child's persona shadows it. */
  persona?: string
  maxParallelToolCalls?: number
  /** The default limits of every child (CONTRACT.md §11); a request's or an ancestor's may narrow them. */
  limits?: ChildLimits
}

export interface HostSettings {
  isolation: Isolation
  transport: Transport | undefined
  agentModule: URL | undefined
  abortGraceMs: number
  store: SessionStore
  persona: string | undefined
  maxParallelToolCalls: number
  pool: PoolSettings
  sandbox: SandboxOptions
  limits: ChildLimits | undefined
}

const OPTION_KEYS = new Set(['isolation', 'transport', 'agentModule', 'pool', 'sandbox', 'abortGraceMs', 'store', 'persona', 'maxParallelToolCalls', 'limits'])
const POOL_KEYS = new Set(['minThreads', 'maxThreads', 'childrenPerWorker', 'idleTimeoutMs', 'loadTimeoutMs', 'maxQueue', 'resourceLimits', 'niceIncrement', 'env'])
const LIMIT_KEYS = new Set(['maxOldGenerationSizeMb', 'maxYoungGenerationSizeMb', 'codeRangeSizeMb', 'stackSizeMb'])
/** A child process takes its heap caps as Node flags; these two have none. */
const THREAD_ONLY_LIMITS = new Set(['codeRangeSizeMb', 'stackSizeMb'])
const ENV_NAME = /^[^=\0]+$/

export function settingsOf(options: HostOptions): HostSettings {
  if (typeof options !== 'object' || options === null) throw new InvalidOptionError('createHost options', options, 'an object')
  knownKeys('', options, OPTION_KEYS, 'host option')
  const transport = checkTransport(options)
  const isolation = options.isolation ?? 'worker'
  if (isolation !== 'inline' && !isEndpointIsolation(isolation)) throw new InvalidOptionError('isolation', isolation, oneOf(ISOLATIONS))
  if (options.sandbox !== undefined && isolation !== 'process') {
    throw new InvalidOptionError('sandbox', options.sandbox, "given only with isolation: 'process' (worker threads and inline children run with the host's own permissions)")
  }
  // The grace and the liveness margin after it (grace + 1 s) must both fit a timer.
  const abortGraceMs = integerOption('abortGraceMs', options.abortGraceMs, 0, MAX_TIMER_MS - 1000) ?? DEFAULT_ABORT_GRACE_MS
  const maxParallelToolCalls = integerOption('maxParallelToolCalls', options.maxParallelToolCalls, 1) ?? 8
  if (options.persona !== undefined && typeof options.persona !== 'string') throw new InvalidOptionError('persona', options.persona, 'a string')
  const store = options.store ?? createMemoryStore()
  for (const method of ['create', 'append', 'read', 'list', 'delete'] as const) {
    if (typeof store?.[method] !== 'function') throw new InvalidOptionError('store', store, `a SessionStore (its ${method}() is missing)`)
  }
  return {
    isolation,
    transport,
    agentModule: options.agentModule === undefined ? undefined : checkedModuleUrl(options.agentModule),
    abortGraceMs,
    store,
    persona: options.persona,
    maxParallelToolCalls,
    pool: poolSettings(options.pool ?? {}, isolation),
    sandbox: checkSandbox(options.sandbox ?? {}),
    limits: checkLimits(options.limits),
  }
}

/** A transport given instead of isolation runs its children elsewhere, with its own pool and sandbox. */
function checkTransport(options: HostOptions): Transport | undefined {
  const { transport } = options
  if (transport === undefined) return undefined
  if (typeof transport !== 'object' || transport === null || typeof transport.open !== 'function') {
    throw new InvalidOptionError('transport', transport, "a transport made for createHost, such as bullmqTransport({ connection }) from 'subagent-worker/bullmq'")
  }
  for (const key of ['isolation', 'pool', 'sandbox'] as const) {
    if (options[key] !== undefined) {
      throw new InvalidOptionError(key, options[key], `left out when a transport is given (the ${transport.name} transport's runners are configured where they run)`)
    }
  }
  return transport
}

function poolSettings(pool: PoolOptions, isolation: Isolation): PoolSettings {
  if (typeof pool !== 'object' || pool === null || Array.isArray(pool)) throw new InvalidOptionError('pool', pool, 'an object')
  knownKeys('pool.', pool, POOL_KEYS, 'pool option')
  const cores = availableParallelism()
  const maxThreads = integerOption('pool.maxThreads', pool.maxThreads, 1, 1024) ?? Math.max(1, Math.round(cores * 1.5))
  const minThreads = integerOption('pool.minThreads', pool.minThreads, 0, 1024)
  if (minThreads !== undefined && minThreads > maxThreads) throw new InvalidOptionError('pool.minThreads', minThreads, `at most pool.maxThreads (${maxThreads})`)
  const maxQueue = pool.maxQueue === Infinity ? Infinity : (integerOption('pool.maxQueue', pool.maxQueue, 0) ?? Infinity)
  return {
    maxThreads,
    minThreads: minThreads ?? Math.min(maxThreads, Math.max(1, Math.floor(cores / 2))),
    childrenPerWorker: integerOption('pool.childrenPerWorker', pool.childrenPerWorker, 1) ?? 1,
    idleTimeoutMs: integerOption('pool.idleTimeoutMs', pool.idleTimeoutMs, 0, MAX_TIMER_MS) ?? 10_000,
    loadTimeoutMs: integerOption('pool.loadTimeoutMs', pool.loadTimeoutMs, 1, MAX_TIMER_MS) ?? DEFAULT_LOAD_TIMEOUT_MS,
    maxQueue,
    resourceLimits: resourceLimits(pool.resourceLimits, isolation),
    niceIncrement: integerOption('pool.niceIncrement', pool.niceIncrement, 0, MAX_NICE) ?? 0,
    env: environment(pool.env),
  }
}

function resourceLimits(limits: ResourceLimits | undefined, isolation: Isolation): ResourceLimits | undefined {
  if (limits === undefined) return undefined
  if (typeof limits !== 'object' || limits === null) throw new InvalidOptionError('pool.resourceLimits', limits, 'an object of heap limits in MB')
  for (const [key, value] of Object.entries(limits)) {
    if (!LIMIT_KEYS.has(key)) throw new InvalidOptionError(`pool.resourceLimits.${key}`, value, `a known limit (${[...LIMIT_KEYS].join(', ')})`)
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) throw new InvalidOptionError(`pool.resourceLimits.${key}`, value, 'a positive number of MB')
    if (isolation === 'process' && THREAD_ONLY_LIMITS.has(key)) {
      throw new InvalidOptionError(`pool.resourceLimits.${key}`, value, "left out with isolation: 'process' (a child process caps only its heap: maxOldGenerationSizeMb, maxYoungGenerationSizeMb)")
    }
  }
  return { ...limits }
}

/** The runners' environment: exact values, or the names of host variables to copy now; nothing by default. */
function environment(env: PoolOptions['env']): Record<string, string> {
  if (env === undefined) return {}
  const expected = 'an object of exact values ({ NAME: "value" }) or a list of variable names to copy from the host'
  if (Array.isArray(env)) {
    const copied: Record<string, string> = {}
    for (const name of env) {
      if (typeof name !== 'string' || !ENV_NAME.test(name)) throw new InvalidOptionError('pool.env', env, expected)
      const value = process.env[name]
      if (value !== undefined) copied[name] = value
    }
    return copied
  }
  if (typeof env !== 'object' || env === null) throw new InvalidOptionError('pool.env', env, expected)
  for (const [name, value] of Object.entries(env)) {
    if (!ENV_NAME.test(name) || typeof value !== 'string') throw new InvalidOptionError(`pool.env.${name}`, value, 'a string')
  }
  return { ...env }
}

/** A runner imports the module by URL, whatever its working directory: a relative path would mean another file there. */
function checkedModuleUrl(specifier: unknown): URL {
  if (specifier instanceof URL) return specifier
  const expected = "a URL (new URL('./agents.mjs', import.meta.url)) or an absolute path"
  if (typeof specifier !== 'string' || specifier === '') throw new InvalidOptionError('agentModule', specifier, expected)
  if (/^[a-z][a-z0-9+.-]+:/i.test(specifier) && !specifier.startsWith('file:')) throw new InvalidOptionError('agentModule', specifier, `${expected}: a string names a file (an absolute path or a file: URL); give any other URL as a URL object`)
  if (!isAbsolute(specifier) && !specifier.startsWith('file:')) throw new InvalidOptionError('agentModule', specifier, `${expected}: a relative path is ambiguous`)
  return agentModuleUrl(specifier)
}

function knownKeys(prefix: string, options: object, known: Set<string>, what: string): void {
  for (const key of Object.keys(options)) {
    if (!known.has(key)) {
      throw new InvalidOptionError(`${prefix}${key}`, (options as Record<string, unknown>)[key], `a known ${what} (an unknown key: the known ones are ${[...known].join(', ')})`)
    }
  }
}

/** `'a', 'b' or 'c'`. */
function oneOf(names: readonly string[]): string {
  const quoted = names.map((name) => `'${name}'`)
  return quoted.length < 2 ? quoted.join('') : `${quoted.slice(0, -1).join(', ')} or ${quoted.at(-1)}`
}
