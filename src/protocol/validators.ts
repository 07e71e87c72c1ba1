/** The validators every boundary uses, compiled once each. */
import { ContentBlock } from './shapes/content.js'
import { HostFrame, HostMessage, RunnerFrame, RunnerMessage } from './messages.js'
import { KnownSessionEvent, SessionEvent } from './shapes/session.js'
import { StreamChunk } from './shapes/stream.js'
import { validator } from './validate.js'

export const isContentBlock = validator<ContentBlock>(ContentBlock)
/** A known event with its data checked: what a child may stream back. */
export const isKnownSessionEvent = validator<KnownSessionEvent>(KnownSessionEvent)
/** Any well-formed event: what a foreign parent's session may contain. */
export const isSessionEvent = validator<SessionEvent>(SessionEvent)
export const isStreamChunk = validator<StreamChunk>(StreamChunk)
export const isHostFrame = validator<HostMessage[]>(HostFrame)
export const isHostMessage = validator<HostMessage>(HostMessage)
export const isRunnerFrame = validator<RunnerMessage[]>(RunnerFrame)
export const isRunnerMessage = validator<RunnerMessage>(RunnerMessage)
