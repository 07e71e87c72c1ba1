/**
 * The conversation as the model sees it, projected from a session's events incrementally: the
 * same array grows step by step, never rebuilt or copied (a model that keeps a request past its
 * stream copies the messages it wants to keep). The loop projects its own session; a host serving
 * a child's model projects its own copy of the child's session, so a runner never sends it.
 */
import type { SessionEvent } from '../../protocol/shapes/session.js'
import type { ModelMessage } from './model.js'

export class Conversation {
  readonly #events: readonly SessionEvent[]
  readonly #messages: ModelMessage[] = []
  #projected = 0

  constructor(events: readonly SessionEvent[]) {
    this.#events = events
  }

  /** The messages of every event recorded so far. */
  messages(): ModelMessage[] {
    const events = this.#events
    for (; this.#projected < events.length; this.#projected++) {
      const { type, data } = events[this.#projected]!
      if (type === 'user/message') {
        this.#messages.push({ role: 'user', content: data.content })
      } else if (type === 'assistant/message') {
        const { content } = data
        if (content.length > 0) this.#messages.push({ role: 'assistant', content })
      } else if (type === 'tool/result') {
        const { callId, name, isError, content } = data
        this.#messages.push({ role: 'tool', callId, name, isError, content })
      }
    }
    return this.#messages
  }
}
