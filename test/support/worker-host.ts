/** A worker-transport host for the tests in test/worker: a fixture module, a memory store, a scripted host model and a parent. */
import { createHost, createMemoryStore, ScriptedModel, type Host, type HostOptions, type ScriptEntry, type SubagentStartRequest } from 'subagent-worker'

const open: Host[] = []

/** `module` is a fixture's path; the host is closed by `closeWorkerHosts`. */
export function workerHost(module: string, script: ScriptEntry[], options: HostOptions = {}) {
  const store = createMemoryStore()
  const host = createHost({ isolation: 'worker', agentModule: module, store, abortGraceMs: 200, ...options })
  open.push(host)
  const model = new ScriptedModel(script)
  host.models.register('scripted', model)
  const parent = host.createAgent({ options: { provider: 'scripted' } })
  /** One whole delegation; resolves with its result and the events the host saw, once disposed. */
  const run = async (request: Partial<SubagentStartRequest> = {}) => {
    const child = await host.spawn.start({ prompt: 'go', parent, signal: new AbortController().signal, ...request })
    const result = await child.result
    const events = host.agents.get(child.id)!.session.events
    await child.dispose()
    return { id: child.id, result, events }
  }
  return { host, model, parent, store, run }
}

export async function closeWorkerHosts(): Promise<void> {
  await Promise.all(open.splice(0).map((host) => host.close()))
}
