/** The validators every boundary uses, compiled once each. */
import { ContentBlock } from './content.js'
import { HostFrame, HostMessage, RunnerFrame, RunnerMessage } from './messages.js'
import { KnownSessionEvent, SessionEvent } from './session.js'
import { StreamChunk } from './stream.js'
import { validator, validatorOf } from './validate.js'

export const isContentBlock = validator(ContentBlock)
/** A known event with its data checked: what a child may stream back. */
export const isKnownSessionEvent = validator(KnownSessionEvent)
/** Any well-formed event: what a foreign parent's session may contain. */
export const isSessionEvent = validatorOf<SessionEvent>(SessionEvent)
export const isStreamChunk = validator(StreamChunk)
export const isHostFrame = validator(HostFrame)
export const isHostMessage = validator(HostMessage)
export const isRunnerFrame = validator(RunnerFrame)
export const isRunnerMessage = validator(RunnerMessage)
