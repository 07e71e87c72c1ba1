/** Loads the host's agent module: the same file every worker thread imports. */
import { isAbsolute, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { defineAgentModule, type AgentModule } from './module.js'
import { messageOf, subagentError } from '../protocol/errors.js'

/** A file URL for an absolute path, or the URL itself (the host refuses a relative path first). */
export function agentModuleUrl(specifier: string | URL): URL {
  if (specifier instanceof URL) return specifier
  if (typeof specifier !== 'string' || specifier === '') throw subagentError('ERR_SUBAGENT_DEFINITION', 'agentModule must be a path or a URL')
  if (/^[a-z][a-z0-9+.-]*:/i.test(specifier) && !isAbsolute(specifier)) return new URL(specifier)
  return pathToFileURL(resolve(specifier))
}

const loaded = new Map<string, Promise<AgentModule>>()

/** Imports and checks an agent module once per URL in this thread. */
export function loadAgentModule(url: URL | string): Promise<AgentModule> {
  const href = typeof url === 'string' ? url : url.href
  let module = loaded.get(href)
  if (!module) {
    module = importAgentModule(href)
    loaded.set(href, module)
  }
  return module
}

async function importAgentModule(href: string): Promise<AgentModule> {
  let namespace: { default?: unknown; agentModule?: unknown }
  try {
    namespace = await import(href)
  } catch (error) {
    throw subagentError('ERR_SUBAGENT_MODULE_LOAD', `agent module ${href} failed to load: ${loadFailure(error)}`, { cause: error })
  }
  const exported = namespace.default ?? namespace.agentModule
  if (exported === undefined) {
    throw subagentError('ERR_SUBAGENT_DEFINITION', `agent module ${href} must export its module as default: export default defineAgentModule({ ... })`)
  }
  try {
    return defineAgentModule(exported as AgentModule)
  } catch (error) {
    throw subagentError('ERR_SUBAGENT_DEFINITION', `agent module ${href} is not a valid agent module: ${messageOf(error)}`, { cause: error })
  }
}

/** Why an import failed; a sandboxed child process says what it may not read, and how to grant it. */
function loadFailure(error: unknown): string {
  const { code, permission, resource } = (error ?? {}) as { code?: unknown; permission?: unknown; resource?: unknown }
  const message = messageOf(error)
  if (code !== 'ERR_ACCESS_DENIED' || typeof resource !== 'string') return message
  return `${message}: the sandbox does not grant ${String(permission)} on ${resource} (grant it with the host's sandbox.fsRead)`
}
