/**
 * Composing a delegated child inside the creation transaction: the delegation scope, the persona,
 * the tool restriction, the structured-output runtime and the descriptor hook. Both transports
 * call this with the same plain-data spec, so a child is the same thing on either side.
 */
import type { ChildSpec } from '../protocol/shapes/child.js'
import type { ChildDescriptor, SessionEvent } from '../protocol/shapes/session.js'
import type { AgentView } from './view.js'
import { AgentRuntime, type AgentEnvironment } from './loop.js'
import { PromptSections, SECTION_ORDER, type PromptSection } from './prompt.js'
import { guidanceSections, type ToolDefinition } from './tools/tools.js'
import { attachStructuredRuntime, STRUCTURED_OUTPUT_SECTION, type StructuredCapture } from './tools/structured.js'

export type { ChildDescriptor, ChildSpec }

export interface ComposedChild {
  agent: AgentRuntime
  structured?: StructuredCapture
}

export const DELEGATION_SCOPE =
  'You are a delegated subagent working on one task for a parent agent. Your tools and permissions were fixed when you were started and cannot be widened. If an operation is denied or a tool is missing, do not retry it or look for a way around it: finish with what you could do and say plainly which limit stopped you.'

/** Who a delegated child is told it is: its persona (the host resolved it: its own or the deployment's) and the delegation scope. */
function identitySections(spec: ChildSpec): PromptSection[] {
  const { persona } = spec
  const scope: PromptSection = { id: 'delegation-scope', order: SECTION_ORDER.delegationScope, text: DELEGATION_SCOPE }
  return persona === undefined ? [scope] : [{ id: 'persona', order: SECTION_ORDER.persona, text: persona }, scope]
}

/**
 * The system prompt `composeChild` gives a child, from its spec and the tools a request lists that
 * it can see (their guidance): what a host serving the child's model calls sends, whatever prompt
 * its runner put in the request.
 */
export function childSystemPrompt(spec: ChildSpec, visibleTools: Iterable<ToolDefinition> = []): string {
  const prompt = new PromptSections()
  for (const section of identitySections(spec)) prompt.set(section)
  if (spec.outputSchema) prompt.set(STRUCTURED_OUTPUT_SECTION)
  return prompt.render(guidanceSections(visibleTools))!
}

/** `view` is what the child's tools and hooks see of it (the host's view, where there is one). */
export function composeChild(spec: ChildSpec, env: AgentEnvironment, view: AgentView): ComposedChild {
  // A foreign parent's events need only a seq and a type (that is all a seed is checked for): the
  // child carries them as they are, unread.
  const seed = spec.seed.map(({ seq, type, data }) => ({ seq, type, data }) as SessionEvent)
  const agent = new AgentRuntime({ id: spec.id, options: spec.options, header: spec.header, seed, view }, { ...env, delegated: true })
  for (const section of identitySections(spec)) agent.prompt.set(section)
  if (spec.toolFilter) agent.tools.restrict(spec.toolFilter)
  const structured = spec.outputSchema ? attachStructuredRuntime(agent, spec.outputSchema) : undefined

  // A moved child, rebuilt from its session, described itself already.
  let described = agent.session.events.slice(spec.header.seedLength ?? 0).some((event) => event.type === 'subagent/descriptor')
  agent.beforeModelRequest(() => {
    if (described) return
    described = true
    const { mode, provider, label } = spec.descriptor
    agent.session.append('subagent/descriptor', label === undefined ? { mode, provider } : { mode, provider, label })
  })
  return structured ? { agent, structured } : { agent }
}
