/** The validators every boundary uses, compiled once each, each typed by its schema. */
import { ContentBlock } from './shapes/content.js'
import { ChildJob, RoomMessage, TakeMessage } from './shapes/job.js'
import { HostFrame, HostMessage, RunnerFrame, RunnerMessage } from './messages.js'
import { KnownSessionEvent, SessionEvent, ToolErrorCode } from './shapes/session.js'
import { StreamChunk } from './shapes/stream.js'
import { validator } from './validate.js'

export const isContentBlock = validator(ContentBlock)
/** A known event with its data checked: what a child may stream back. */
export const isKnownSessionEvent = validator(KnownSessionEvent, ContentBlock)
/** Any well-formed event: what a foreign parent's session may contain. */
export const isSessionEvent = validator(SessionEvent)
export const isStreamChunk = validator(StreamChunk)
export const isToolErrorCode = validator(ToolErrorCode)
export const isHostFrame = validator(HostFrame, HostMessage, ContentBlock, StreamChunk)
export const isHostMessage = validator(HostMessage, ContentBlock, StreamChunk)
export const isRunnerFrame = validator(RunnerFrame, RunnerMessage, ContentBlock, KnownSessionEvent)
export const isRunnerMessage = validator(RunnerMessage, ContentBlock, KnownSessionEvent)
/** A job as a node reads it from the queue (anyone with access to the broker may have written it). */
export const isChildJob = validator(ChildJob)
export const isTakeMessage = validator(TakeMessage)
export const isRoomMessage = validator(RoomMessage)
