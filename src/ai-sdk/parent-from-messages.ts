/**
 * `parentFromMessages(host, messages)`: an AI SDK conversation as a parent view, so a parent
 * written with the AI SDK can delegate, and `host.fork` seeds its child with that conversation.
 *
 * Turns: a user message opens one (consecutive user messages share it); the assistant and tool
 * messages after it are its steps. A turn followed by another user message is completed, and so
 * is the last one when it ends with an assistant answer that calls no tool; each completed turn
 * is closed by `turn/end`. A turn still waiting for its model (the last user message, or tool
 * results not yet answered: the AI SDK's `execute` always sees that) stays open, and a fork never
 * copies an open turn, exactly as for a parent of this library.
 *
 * Not carried over: system messages (the parent's own instructions; a child gets its own system
 * prompt, as any fork does), reasoning, tool approvals, and provider-executed tool calls and
 * results (the provider ran them; there is no client tool result to pair them with). Images and
 * files become a visible `[... omitted ...]` text, since session messages carry only text and
 * tool calls.
 */
import { randomUUID } from 'node:crypto'
import type { AgentOptions, AgentView, ContentBlock, Host, SessionEvent, SessionEventMap, SessionEventType, SessionHeader, ToolResultData } from '../index.js'
import { subagentError } from '../protocol/errors.js'

/**
 * A message part of either `ai` version: any object with a string `type`, checked when read. (The
 * second member lets literals carry their fields; the first, the SDK's interface-typed parts.)
 */
export type MessagePart = { readonly type: string } | { readonly type: string; readonly [field: string]: unknown }

/** An AI SDK `ModelMessage` of `ai` 5, 6 or 7, typed by shape. */
export type AiSdkModelMessage =
  | { readonly role: 'system'; readonly content: string }
  | { readonly role: 'user' | 'assistant'; readonly content: string | readonly MessagePart[] }
  | { readonly role: 'tool'; readonly content: readonly MessagePart[] }

export interface ForeignParentInit {
  /**
   * The parent's id: its children's `parentSession`, and the owner of the background jobs it
   * starts. Default: a fresh `ai-sdk-<uuid>`.
   */
  id?: string
  /** What a child inherits (provider, model, maxTokens) unless its agentOptions override them. */
  options?: AgentOptions
  /** Recorded in the header of each child. */
  cwd?: string
}

const COMPLETED = { reason: { kind: 'completed' } } as const

/**
 * The host is where the id is looked up: an id naming an agent of this host (`host.agents`) is
 * that agent speaking through the AI SDK, so the view keeps its header (delegation depth, cwd)
 * and its options under those of `init`: `maxDepth` still counts from where it really is. Any
 * other id is a top-level parent, at depth 0.
 */
export function parentFromMessages(host: Pick<Host, 'agents'>, messages: readonly AiSdkModelMessage[], init: ForeignParentInit = {}): AgentView {
  if (typeof host?.agents?.get !== 'function') throw subagentError('ERR_SUBAGENT_ARGUMENT', 'parentFromMessages needs the host (createHost()) its children will run on')
  if (!Array.isArray(messages)) throw subagentError('ERR_SUBAGENT_ARGUMENT', 'parentFromMessages needs an array of AI SDK ModelMessages (system, user, assistant, tool)')
  if (typeof init !== 'object' || init === null) throw subagentError('ERR_SUBAGENT_ARGUMENT', 'parentFromMessages init must be an object { id?, options?, cwd? }')
  const id = init.id ?? `ai-sdk-${randomUUID()}`
  if (typeof id !== 'string' || id === '') throw subagentError('ERR_SUBAGENT_ARGUMENT', 'parentFromMessages init.id must be a non-empty string')
  if (init.cwd !== undefined && typeof init.cwd !== 'string') throw subagentError('ERR_SUBAGENT_ARGUMENT', 'parentFromMessages init.cwd must be a string')

  const live = host.agents.get(id)
  const header: SessionHeader = live ? { ...live.session.header } : { type: 'session', id, createdAt: new Date().toISOString() }
  if (live) {
    const depth = Math.max(live.session.header.delegationDepth ?? 0, live.options.subagentDepth ?? 0)
    if (depth > 0) header.delegationDepth = depth
  }
  if (init.cwd !== undefined) header.cwd = init.cwd
  const options: AgentOptions = { ...live?.options, ...init.options }
  return { id, options, session: { header, events: toEvents(messages) } }
}

function toEvents(messages: readonly AiSdkModelMessage[]): SessionEvent[] {
  const events: SessionEvent[] = []
  const push = <T extends SessionEventType>(type: T, data: SessionEventMap[T]) => void events.push({ seq: events.length, type, data } as SessionEvent)
  let open = false
  // The open turn's user content while nothing has followed it: a next user message joins it.
  let userContent: ContentBlock[] | undefined
  // The last message answered the open turn: an assistant message that calls no tool.
  let answered = false
  const openTurn = () => {
    if (!open) push('turn/start', {})
    open = true
    userContent = undefined
  }

  messages.forEach((message: unknown, index) => {
    const where = `messages[${index}]`
    if (typeof message !== 'object' || message === null) throw subagentError('ERR_SUBAGENT_ARGUMENT', `${where} is not an AI SDK ModelMessage`)
    const { role, content } = message as { role?: unknown; content?: unknown }
    switch (role) {
      case 'system':
        return
      case 'user': {
        const blocks = userBlocks(content, where)
        if (userContent) {
          userContent.push(...blocks)
          return
        }
        if (open) push('turn/end', COMPLETED)
        push('turn/start', {})
        push('user/message', { content: blocks, source: { kind: 'user' } })
        open = true
        userContent = blocks
        answered = false
        return
      }
      case 'assistant': {
        openTurn()
        const blocks = assistantBlocks(content, where)
        push('assistant/message', { content: blocks })
        answered = !blocks.some((block) => block.type === 'tool-call')
        return
      }
      case 'tool':
        openTurn()
        for (const [i, part] of partsOf(content, where).entries()) {
          if (part.type === 'tool-result') push('tool/result', toolResult(part, `${where}.content[${i}]`))
        }
        answered = false
        return
      default:
        throw subagentError('ERR_SUBAGENT_ARGUMENT', `${where} has the role ${JSON.stringify(role)}: AI SDK messages are system, user, assistant or tool`)
    }
  })
  if (open && answered) push('turn/end', COMPLETED)
  return events
}

function userBlocks(content: unknown, where: string): ContentBlock[] {
  if (typeof content === 'string') return content === '' ? [] : [{ type: 'text', text: content }]
  return partsOf(content, where).map((part) => (part.type === 'text' ? { type: 'text', text: textOf(part, where) } : omitted(part.type)))
}

function assistantBlocks(content: unknown, where: string): ContentBlock[] {
  if (typeof content === 'string') return content === '' ? [] : [{ type: 'text', text: content }]
  const blocks: ContentBlock[] = []
  for (const part of partsOf(content, where)) {
    const fields = part as unknown as Record<string, unknown>
    switch (part.type) {
      case 'text': {
        const text = textOf(part, where)
        if (text !== '') blocks.push({ type: 'text', text })
        break
      }
      case 'tool-call': {
        if (fields['providerExecuted'] === true) break
        const { toolCallId, toolName, input } = fields
        if (typeof toolCallId !== 'string' || typeof toolName !== 'string') throw subagentError('ERR_SUBAGENT_ARGUMENT', `${where} has a tool-call part without a string toolCallId and toolName`)
        blocks.push({ type: 'tool-call', id: toolCallId, name: toolName, arguments: JSON.stringify(input ?? {}) })
        break
      }
      case 'reasoning':
      case 'tool-result':
      case 'tool-approval-request':
        break
      default:
        blocks.push(omitted(part.type))
    }
  }
  return blocks
}

function toolResult(part: MessagePart, where: string): ToolResultData {
  const { toolCallId, toolName, output } = part as unknown as Record<string, unknown>
  if (typeof toolCallId !== 'string' || typeof toolName !== 'string') throw subagentError('ERR_SUBAGENT_ARGUMENT', `${where} is a tool-result part without a string toolCallId and toolName`)
  const result = (isError: boolean, text: string): ToolResultData => ({
    callId: toolCallId,
    name: toolName,
    isError,
    ...(isError ? { code: 'FAILED' as const } : {}),
    content: [{ type: 'text', text }],
  })
  const { type, value, reason } = (typeof output === 'object' && output !== null ? output : {}) as Record<string, unknown>
  switch (type) {
    case 'text':
      return result(false, String(value))
    case 'json':
      return result(false, JSON.stringify(value) ?? '')
    case 'error-text':
      return result(true, String(value))
    case 'error-json':
      return result(true, JSON.stringify(value) ?? '')
    case 'execution-denied':
      return { ...result(true, typeof reason === 'string' ? reason : 'the tool call was denied'), code: 'DENIED' }
    case 'content': {
      const items = Array.isArray(value) ? (value as MessagePart[]) : []
      return result(false, items.map((item) => (item.type === 'text' ? textOf(item, where) : omitted(item.type).text)).join(''))
    }
    default:
      throw subagentError('ERR_SUBAGENT_ARGUMENT', `${where} has a tool result output of unknown type ${JSON.stringify(type)}`)
  }
}

function partsOf(content: unknown, where: string): MessagePart[] {
  if (!Array.isArray(content)) throw subagentError('ERR_SUBAGENT_ARGUMENT', `${where} must have a content array of parts`)
  content.forEach((part: unknown, i) => {
    if (typeof part !== 'object' || part === null || typeof (part as MessagePart).type !== 'string') {
      throw subagentError('ERR_SUBAGENT_ARGUMENT', `${where}.content[${i}] is not a message part (an object with a string "type")`)
    }
  })
  return content as MessagePart[]
}

function textOf(part: MessagePart, where: string): string {
  const { text } = part as { text?: unknown }
  if (typeof text !== 'string') throw subagentError('ERR_SUBAGENT_ARGUMENT', `${where} has a text part without a string "text"`)
  return text
}

/** What cannot be carried is shown, never silently dropped. */
function omitted(type: string): { type: 'text'; text: string } {
  return { type: 'text', text: `[${type} part omitted: subagent sessions carry only text and tool calls]` }
}
