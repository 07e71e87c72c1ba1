/** The validators every boundary uses, compiled once each. */
import { ContentBlock } from './content.js'
import { ChildJob, TakeMessage } from './job.js'
import { HostFrame, HostMessage, RunnerFrame, RunnerMessage } from './messages.js'
import { KnownSessionEvent, SessionEvent } from './session.js'
import { StreamChunk } from './stream.js'
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
/** A job as a node reads it from the queue (anyone with access to the broker may have written it). */
export const isChildJob = validator<ChildJob>(ChildJob)
export const isTakeMessage = validator<TakeMessage>(TakeMessage)
