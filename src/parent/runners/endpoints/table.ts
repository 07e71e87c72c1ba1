/**
 * Isolation → the opener of one pooled runner, the one place the endpoints are named. A new
 * in-host endpoint is its own file (how to start, send, end, name a death) and a row here; the
 * pool, the channel and the host's child state machine are the same for every row.
 */
import type { ResourceLimits } from 'node:worker_threads'
import type { OpenEndpoint } from '../runner-site.js'
import { openChildProcess } from './child-process.js'
import { processFlags, type SandboxOptions } from './sandbox.js'
import { openWorkerThread } from './worker-thread.js'

/** What an opener may need of the host's settings, every value filled in. */
export interface EndpointSettings {
  /** Each runner's whole environment. */
  env: Record<string, string>
  resourceLimits: ResourceLimits | undefined
  /** Added to the host's nice value for each runner (priority.ts). */
  niceIncrement: number
  sandbox: SandboxOptions
  agentModule: URL | undefined
}

export const ENDPOINTS = {
  worker: ({ env, resourceLimits, niceIncrement }: EndpointSettings): OpenEndpoint => (events) => openWorkerThread({ env, resourceLimits, niceIncrement }, events),
  process: ({ env, resourceLimits, niceIncrement, sandbox, agentModule }: EndpointSettings): OpenEndpoint => {
    const execArgv = processFlags(sandbox, agentModule, resourceLimits)
    return (events) => openChildProcess({ env, execArgv, niceIncrement }, events)
  },
} as const satisfies Record<string, (settings: EndpointSettings) => OpenEndpoint>

/** An isolation whose children run on pooled runners in this host. */
export type EndpointIsolation = keyof typeof ENDPOINTS

export function isEndpointIsolation(value: unknown): value is EndpointIsolation {
  return typeof value === 'string' && Object.hasOwn(ENDPOINTS, value)
}
