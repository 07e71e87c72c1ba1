/**
 * Which tool call of which agent is starting a child. Every tool call runs inside this context
 * (`executeTool`), the `subagent` tool's and any host tool's that starts a child itself, so the
 * provider can say (in `child:start`) that a nested child belongs to its parent's call: what lets
 * a trace hang the child under that call's span, on every transport (a host tool of a runner's
 * child runs in the host's RPC handler, whose own context says nothing of the call).
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

/** The tool call starting a child of `parentId`, if a tool call of that agent is. */
export function delegatingCallOf(parentId: string): string | undefined {
  const call = current.getStore()
  // A child's own run inherits the context it was started in: only the named parent's call counts.
  return call?.parentId === parentId ? call.callId : undefined
}
