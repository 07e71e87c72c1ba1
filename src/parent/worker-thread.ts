/**
 * A runner on a worker thread. Node delivers every message a thread posted before its 'exit'
 * event, so 'exit' is when its children are settled.
 */
import { Worker, type ResourceLimits } from 'node:worker_threads'
import { messageOf } from '../protocol/values.js'
import type { Fault, RunnerKind } from './channel.js'
import type { Endpoint, EndpointEvents, Exit } from './runner-site.js'

const ENTRY = new URL('../worker/entry.js', import.meta.url)

const KIND: RunnerKind = { noun: 'worker thread', ended: 'terminated' }

export interface ThreadSettings {
  resourceLimits: ResourceLimits | undefined
  /** The thread's whole `process.env` (never the host's). */
  env: Record<string, string>
}

export function openWorkerThread(settings: ThreadSettings, events: EndpointEvents): Endpoint {
  const worker = new Worker(ENTRY, { env: settings.env, ...(settings.resourceLimits ? { resourceLimits: settings.resourceLimits } : {}) })
  worker.on('message', events.frame)
  worker.on('messageerror', events.unreadable)
  worker.on('error', events.crashed)
  worker.on('exit', (code: number) => events.exited({ code }))
  // An idle thread never keeps the process alive; one with children does (see hold).
  worker.unref()
  return {
    kind: KIND,
    label: `worker thread ${worker.threadId}`,
    send: (frame) => worker.postMessage(frame),
    terminate: () => void worker.terminate(),
    hold: (held) => (held ? worker.ref() : worker.unref()),
    faultOf,
  }
}

/** Names the cause of a thread's end: the heap limit, an uncaught error, or how it exited. */
function faultOf(exit: Exit, crash: Error | undefined): Fault {
  if (crash) {
    const { name = 'Error', code } = crash as Error & { code?: unknown }
    if (code === 'ERR_WORKER_OUT_OF_MEMORY') {
      return { stopReason: 'error', diagnostic: `the child's worker thread ran out of memory (its resourceLimits heap cap was reached): ${crash.message}` }
    }
    return { stopReason: 'error', diagnostic: `the child's worker thread crashed with an uncaught ${name}: ${messageOf(crash)}` }
  }
  const how = exit.code === undefined ? '' : ` with code ${exit.code}`
  return { stopReason: 'error', diagnostic: `the child's worker thread exited${how} (process.exit was called on that thread, or it was terminated)` }
}
