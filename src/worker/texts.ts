/**
 * A frame's streamed text chunks, of every child on this runner, as one `texts` message: each
 * chunk is its child's next event, side by side with the others' (child, text, child, text ...),
 * where one `events` message a child cost the clone and the host's check an object each. A child
 * adds a chunk here only while nothing else of it is queued later in the frame (RunnerChild
 * decides), so the host reads every child's record in the order the child recorded it.
 */
import type { RunnerMessage } from '../protocol/messages.js'
import type { Sink } from '../protocol/outbox.js'

type TextsMessage = Extract<RunnerMessage, { type: 'texts' }>

export class FrameTexts {
  readonly #outbox: Sink<RunnerMessage>
  /** This frame's message, still open for more chunks. */
  #open: { message: TextsMessage; epoch: number } | undefined

  constructor(outbox: Sink<RunnerMessage>) {
    this.#outbox = outbox
  }

  add(child: string, text: string): void {
    const { epoch } = this.#outbox
    if (this.#open?.epoch === epoch) return void this.#open.message.texts.push(child, text)
    const message: TextsMessage = { type: 'texts', texts: [child, text] }
    this.#outbox.push(message)
    this.#open = { message, epoch }
  }
}
