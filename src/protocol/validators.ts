import type { ContentBlock } from './content.js'
import type { ChildMessage, CreateRequest, HostMessage } from './lifecycle.js'
import type { SessionEvent, SessionHeader } from './session.js'
import type { StreamChunk } from './stream.js'
import { validator } from './validate.js'


export const isContentBlock = validator<ContentBlock>('subagent-worker/content-block')
export const isSessionHeader = validator<SessionHeader>('subagent-worker/session-header')
/** A known event with its data checked: what a child may stream back. */
export const isSessionEvent = validator<SessionEvent>('subagent-worker/session-event')
/** Any well-formed event: what a foreign parent's session may contain. */
export const isAnySessionEvent = validator<SessionEvent>('subagent-worker/any-session-event')
export const isStreamChunk = validator<StreamChunk>('subagent-worker/stream-chunk')
export const isCreateRequest = validator<CreateRequest>('subagent-worker/create-request')
export const isHostMessage = validator<HostMessage>('subagent-worker/host-message')
export const isChildMessage = validator<ChildMessage>('subagent-worker/child-message')
