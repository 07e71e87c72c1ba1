/**
 * Which tool call of which agent is starting a child. The `subagent` tool runs its start inside
 * this context, so the provider can say (in `child:start`) that a nested child belongs to its
 * parent's call: what lets a trace hang the child under that call's span, on every transport.
 */
import { AsyncLocalStorage } from 'node:async_hooks'

export interface DelegatingCall {
  /** The delegating agent's id. */
  parentId: string
  callId: string
}

const current = new AsyncLocalStorage<DelegatingCall>()

export function withDelegatingCall<T>(call: DelegatingCall, start: () => T): T {
  return current.run(call, start)
}

/** The tool call starting a child of `parentId`, if a `subagent` tool call of that agent is. */
export function delegatingCallOf(parentId: string): string | undefined {
  const call = current.getStore()
  // A child's own run inherits the context it was started in: only the named parent's call counts.
  return call?.parentId === parentId ? call.callId : undefined
}
