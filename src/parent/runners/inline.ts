/** The inline transport: the child's loop runs in the host's thread, no runner. The reference for every other transport. */
import { composeChild, type ChildSpec } from '../../agent/child.js'
import type { AgentEnvironment } from '../../agent/loop.js'
import type { ChildHandle, ChildMirror, ChildTransport } from '../transport.js'

export class InlineTransport implements ChildTransport {
  readonly local = true
  readonly #env: (id: string) => AgentEnvironment

  /** `env` gives each child the host's models and tools as they are at its creation. */
  constructor(env: (id: string) => AgentEnvironment) {
    this.#env = env
  }

  async create(spec: ChildSpec, mirror: ChildMirror): Promise<ChildHandle> {
    const env = this.#env(spec.id)
    env.requested = () => mirror.requested()
    const { agent, structured } = composeChild(spec, env, mirror.view)
    agent.session.onAppend((event) => mirror.append(event))
    return {
      async rollback() {
        agent.session.onAppend(undefined)
      },
      async run(prompt) {
        agent.followup(prompt, { kind: 'parent' })
        await agent.whenIdle()
        return structured?.captured ? { structured: { value: structured.value } } : {}
      },
      cancel(reason) {
        agent.cancel(reason)
      },
      notify({ text, source }) {
        agent.notify(text, source)
      },
      async release() {
        agent.cancel({ kind: 'disposed' })
        await agent.whenIdle()
        agent.session.onAppend(undefined)
      },
    }
  }

  async close(): Promise<void> {}
}
