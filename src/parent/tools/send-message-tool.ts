/**
 * `send_message { subagent_id, message }` (CONTRACT.md §13): more work for a continuable child,
 * taken after what it already has, one activation each. A caller may message only the children
 * it started; an unknown, foreign or disposed id is an error result that says which.
 */
import { defineTool, ToolError, type ToolDefinition } from '../../agent/tools/tools.js'
import { SubagentError, subagentError } from '../../protocol/errors.js'
import { continuablesOf } from '../driver/continuable/continuables.js'
import type { Host } from '../host/host.js'
import { SUBAGENT_TOOL_TEXTS as TEXTS } from './texts.js'

/** What a sent message returns: the child it went to, rendered `message sent to subagent <id>`. */
export interface MessageSentValue {
  kind: 'message-sent'
  subagentId: string
}

export type SendMessageArgs = {
  subagent_id: string
  message: string
}

export const SEND_MESSAGE_TEXTS = {
  unknown: (id: string) => `unknown subagent "${id}": send_message takes the id the subagent tool returned when it started a subagent in the background`,
  foreign: (id: string) => `subagent ${id} was not started by you: you may send messages only to subagents you started`,
  disposed: (id: string) => `subagent ${id} was disposed: it takes no more work; start a new subagent instead`,
} as const

export function createSendMessageTool(host: Host): ToolDefinition<SendMessageArgs> {
  const continuables = typeof host === 'object' && host !== null ? continuablesOf(host) : undefined
  if (!continuables) throw subagentError('ERR_SUBAGENT_ARGUMENT', 'createSendMessageTool needs a host made by createHost')
  return defineTool<SendMessageArgs>({
    name: 'send_message',
    description: TEXTS.sendMessage,
    parameters: {
      type: 'object',
      properties: {
        subagent_id: { type: 'string', description: TEXTS.sendMessageId },
        message: { type: 'string', description: TEXTS.sendMessageText },
      },
      required: ['subagent_id', 'message'],
      additionalProperties: false,
    },
    execute({ subagent_id: id, message }, exec) {
      const child = continuables.lookup(id)
      if (!child) throw new ToolError(SEND_MESSAGE_TEXTS.unknown(id))
      // Whose it is comes first: a caller learns nothing of another agent's child but that it is not its own.
      if (child.parentId !== exec.agent.id) throw new ToolError(SEND_MESSAGE_TEXTS.foreign(id))
      if (child.kind === 'disposed') throw new ToolError(SEND_MESSAGE_TEXTS.disposed(id))
      try {
        child.run.send(message)
      } catch (error) {
        // Disposed between the lookup and the send (its disposal had begun).
        if (error instanceof SubagentError && error.code === 'ERR_SUBAGENT_DISPOSED') throw new ToolError(SEND_MESSAGE_TEXTS.disposed(id))
        throw error
      }
      return { kind: 'message-sent', subagentId: id } satisfies MessageSentValue
    },
    render(value) {
      return `message sent to subagent ${(value as MessageSentValue).subagentId}`
    },
  })
}
