/** A library model request as AI SDK `doStream` options (the same for spec v2, v3 and v4). */
import type { ContentBlock, ModelMessage, ModelRequest } from '../index.js'
import type { CallOptions, PromptMessage, PromptText, PromptToolCall, PromptToolResult } from './language-model.js'
import { subagentError } from '../protocol/errors.js'

export function toCallOptions(request: ModelRequest): CallOptions {
  const prompt: PromptMessage[] = []
  if (request.system !== undefined) prompt.push({ role: 'system', content: request.system })
  for (const message of request.messages) {
    const converted = toPromptMessage(message)
    const last = prompt[prompt.length - 1]
    // One tool message per step, as the AI SDK itself sends tool results.
    if (converted.role === 'tool' && last?.role === 'tool') last.content.push(...converted.content)
    else prompt.push(converted)
  }
  const options: CallOptions = { prompt, abortSignal: request.signal }
  if (request.tools !== undefined) {
    options.tools = request.tools.map((tool) => ({ type: 'function', name: tool.name, description: tool.description, inputSchema: tool.parameters as Record<string, unknown> }))
  }
  if (request.maxTokens !== undefined) options.maxOutputTokens = request.maxTokens
  return options
}

function toPromptMessage(message: ModelMessage): PromptMessage {
  switch (message.role) {
    case 'user':
      return { role: 'user', content: message.content.map(userPart) }
    case 'assistant':
      return { role: 'assistant', content: message.content.flatMap(assistantPart) }
    case 'tool': {
      const value = message.content.map((block) => (block.type === 'text' ? block.text : '')).join('')
      const result: PromptToolResult = {
        type: 'tool-result',
        toolCallId: message.callId,
        toolName: message.name,
        output: { type: message.isError ? 'error-text' : 'text', value },
      }
      return { role: 'tool', content: [result] }
    }
  }
}

function userPart(block: ContentBlock): PromptText {
  if (block.type === 'text') return { type: 'text', text: block.text }
  throw subagentError('ERR_SUBAGENT_PROMPT', `a user message carries a tool call ("${block.name}"), which an AI SDK prompt cannot express`)
}

function assistantPart(block: ContentBlock): Array<PromptText | PromptToolCall> {
  if (block.type === 'text') return block.text === '' ? [] : [{ type: 'text', text: block.text }]
  return [{ type: 'tool-call', toolCallId: block.id, toolName: block.name, input: parseArguments(block.arguments) }]
}

/** Tool-call arguments are kept as raw text (they may be cut off); the AI SDK prompt wants a value. */
function parseArguments(text: string): unknown {
  if (text.trim() === '') return {}
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}
