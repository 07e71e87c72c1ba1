/** Loads the host's agent module: the same file every worker thread imports. */
import { isAbsolute, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { defineAgentModule, type AgentModule } from '../agent/module.js'

/** A file URL for a path (relative to the working directory) or URL. */
export function agentModuleUrl(specifier: string | URL): URL {
  if (specifier instanceof URL) return specifier
  if (typeof specifier !== 'string' || specifier === '') throw new TypeError('agentModule must be a path or a URL')
  if (/^[a-z][a-z0-9+.-]*:/i.test(specifier) && !isAbsolute(specifier)) return new URL(specifier)
  return pathToFileURL(resolve(specifier))
}

export async function loadAgentModule(url: URL): Promise<AgentModule> {
  let namespace: { default?: unknown; agentModule?: unknown }
  try {
    namespace = await import(url.href)
  } catch (error) {
    throw new Error(`agent module ${url.href} failed to load: ${error instanceof Error ? error.message : String(error)}`, { cause: error })
  }
  const exported = namespace.default ?? namespace.agentModule
  if (exported === undefined) {
    throw new TypeError(`agent module ${url.href} must export its module as default: export default defineAgentModule({ ... })`)
  }
  return defineAgentModule(exported as AgentModule)
}
