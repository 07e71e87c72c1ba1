import type { ContentBlock } from './content.js'
import type { ChildMessage, CreateRequest, HostMessage } from './lifecycle.js'
import type { SessionEvent } from './session.js'
import type { StreamChunk } from './stream.js'
import { validator, type Validator } from './validate.js'

export const isContentBlock: Validator<ContentBlock> = validator('subagent-worker/content-block')
/** A known event with its data checked: what a child may stream back. */
export const isSessionEvent: Validator<SessionEvent> = validator('subagent-worker/session-event')
/** Any well-formed event: what a foreign parent's session may contain. */
export const isAnySessionEvent: Validator<SessionEvent> = validator('subagent-worker/any-session-event')
export const isStreamChunk: Validator<StreamChunk> = validator('subagent-worker/stream-chunk')
export const isCreateRequest: Validator<CreateRequest> = validator('subagent-worker/create-request')
export const isHostMessage: Validator<HostMessage> = validator('subagent-worker/host-message')
export const isChildMessage: Validator<ChildMessage> = validator('subagent-worker/child-message')
