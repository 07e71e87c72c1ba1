/**
 * `subagent-worker/otel`: OpenTelemetry spans from the host's diagnostics channels (CONTRACT.md
 * §12), following the GenAI semantic conventions. The spans are made in the host's thread from
 * its copy of each child, so a delegation tree is one trace across threads, processes and nodes,
 * and no tracing code runs where a child runs.
 */
import diagnostics_channel from 'node:diagnostics_channel'
import { context, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type Tracer, type TracerProvider } from '@opentelemetry/api'
import type { ChildEndMessage, ChildInfo, ChildStartMessage, ContentBlock, StepMessage, ToolMessage } from '../index.js'
import { subagentError } from '../protocol/errors.js'

export interface InstrumentOptions {
  /** Default: the global tracer provider. */
  tracerProvider?: TracerProvider
  /** Record messages, tool arguments and results as span attributes (default false: they may hold anything). */
  captureContent?: boolean
}

const CHANNELS = {
  childStart: 'subagent-worker:child:start',
  childEnd: 'subagent-worker:child:end',
  step: 'subagent-worker:step',
  tool: 'subagent-worker:tool',
} as const

/** Transports whose children run in this host's process; any other is a network hop. */
const LOCAL_TRANSPORTS = new Set(['inline', 'worker', 'process'])

/** A step's finish as the GenAI conventions name it (`gen_ai.response.finish_reasons`). */
const FINISH_REASONS: Record<NonNullable<StepMessage['finishReason']>, string> = { stop: 'stop', 'tool-calls': 'tool_calls', 'max-tokens': 'length', refusal: 'content_filter' }

interface Open {
  span: Span
  /** The context to start this span's children in. */
  context: Context
}

interface OpenCall extends Open {
  /** Its own start came: false while opened early for a nested child whose start overtook it. */
  announced: boolean
  /** A nested child was started under it (a delegating call starts one). */
  delegated: boolean
}

/** Subscribes to the four channels; the returned function unsubscribes and ends what is open. */
export function instrument(options: InstrumentOptions = {}): () => void {
  if (typeof options !== 'object' || options === null) throw subagentError('ERR_SUBAGENT_ARGUMENT', 'instrument options must be an object like { tracerProvider?, captureContent? }')
  const { tracerProvider, captureContent = false } = options
  if (typeof captureContent !== 'boolean') throw subagentError('ERR_SUBAGENT_ARGUMENT', 'instrument captureContent must be true or false')
  const tracer = (tracerProvider ?? trace.getTracerProvider()).getTracer('subagent-worker')
  const spans = new ChildSpans(tracer, captureContent)
  const subscriptions: Array<[string, (message: unknown) => void]> = [
    [CHANNELS.childStart, (m) => spans.childStart(m as ChildStartMessage)],
    [CHANNELS.childEnd, (m) => spans.childEnd(m as ChildEndMessage)],
    [CHANNELS.step, (m) => spans.step(m as StepMessage)],
    [CHANNELS.tool, (m) => spans.tool(m as ToolMessage)],
  ]
  for (const [name, onMessage] of subscriptions) diagnostics_channel.subscribe(name, onMessage)
  let installed = true
  return () => {
    if (!installed) return
    installed = false
    for (const [name, onMessage] of subscriptions) diagnostics_channel.unsubscribe(name, onMessage)
    spans.endAll()
  }
}

/** The open spans of one installation, by child, step and tool call. */
class ChildSpans {
  readonly #tracer: Tracer
  readonly #captureContent: boolean
  readonly #agents = new Map<string, Open & { child: ChildInfo }>()
  readonly #steps = new Map<string, Span>()
  /** By `${childId}\0${callId}`, oldest first: calls of one step may share an id, each a run of its own. */
  readonly #tools = new Map<string, OpenCall[]>()

  constructor(tracer: Tracer, captureContent: boolean) {
    this.#tracer = tracer
    this.#captureContent = captureContent
  }

  childStart(m: ChildStartMessage): void {
    const parent = this.#parentOf(m)
    const attributes = common(m, 'invoke_agent')
    attributes['gen_ai.agent.id'] = m.id
    if (m.label !== undefined) attributes['gen_ai.agent.name'] = m.label
    attributes['subagent_worker.depth'] = m.depth
    attributes['subagent_worker.transport'] = m.transport
    const kind = LOCAL_TRANSPORTS.has(m.transport) ? SpanKind.INTERNAL : SpanKind.CLIENT
    const span = this.#tracer.startSpan(`invoke_agent ${m.label ?? m.provider}`, { kind, startTime: m.startTime, attributes }, parent)
    this.#agents.set(m.id, { span, context: trace.setSpan(parent, span), child: m })
  }

  childEnd(m: ChildEndMessage): void {
    const open = this.#agents.get(m.id)
    if (!open) return
    this.#agents.delete(m.id)
    const { span } = open
    setUsage(span, m.usage)
    span.setAttribute('subagent_worker.stop_reason', m.stopReason)
    if (m.stopReason !== 'completed') fail(span, m.stopReason, m.diagnostic)
    span.end(m.endTime)
  }

  step(m: StepMessage): void {
    const key = `${m.id}\0${m.step}`
    if (m.phase === 'start') {
      const parent = this.#agents.get(m.id)?.context ?? context.active()
      const name = `chat ${m.model ?? m.modelProvider ?? m.provider}`
      this.#steps.set(key, this.#tracer.startSpan(name, { kind: SpanKind.CLIENT, startTime: m.startTime, attributes: common(m, 'chat') }, parent))
      return
    }
    const span = this.#steps.get(key)
    if (!span) return
    this.#steps.delete(key)
    setUsage(span, m.usage)
    if (m.finishReason) span.setAttribute('gen_ai.response.finish_reasons', [FINISH_REASONS[m.finishReason]])
    if (this.#captureContent && m.output) span.setAttribute('gen_ai.output.messages', JSON.stringify([{ role: 'assistant', parts: m.output.map(part) }]))
    if (m.error !== undefined) fail(span, m.error)
    span.end(m.endTime)
  }

  tool(m: ToolMessage): void {
    if (m.phase === 'start') {
      this.#startTool(m)
      return
    }
    const key = `${m.id}\0${m.callId}`
    const calls = this.#tools.get(key)
    // The oldest started call of that id: the host ends the calls of one id in the order they started.
    const call = calls?.find((open) => open.announced)
    if (!calls || !call) return
    calls.splice(calls.indexOf(call), 1)
    if (calls.length === 0) this.#tools.delete(key)
    const { span } = call
    if (this.#captureContent && m.result) span.setAttribute('gen_ai.tool.call.result', m.result.map((b) => (b.type === 'text' ? b.text : '')).join(''))
    if (m.error !== undefined) fail(span, m.error)
    else if (m.isError) fail(span, m.code ?? 'tool_error')
    span.end(m.endTime)
  }

  /** Ends whatever is still open: an uninstalled instrumentation leaves nothing behind. */
  endAll(): void {
    for (const span of this.#steps.values()) span.end()
    for (const calls of this.#tools.values()) for (const { span } of calls) span.end()
    for (const { span } of this.#agents.values()) span.end()
    this.#steps.clear()
    this.#tools.clear()
    this.#agents.clear()
  }

  /**
   * A nested child's parent is the `execute_tool` span of the call that started it (opened here
   * if the child's start came first); any other child's, even one whose parent is a child started
   * directly with `start()`, is the context active at `start()`: `child:start` is published on
   * the host's thread from within `start()`, whose awaits keep the caller's async context.
   */
  #parentOf(m: ChildStartMessage): Context {
    if (m.parentCallId !== undefined) {
      const parent = this.#agents.get(m.parentId)
      if (parent) {
        // Calls of one step may share an id: the oldest without a child yet is this child's.
        // Opened here, its name is 'subagent', the tool's default name, until the call's own start comes.
        const call = this.#tools.get(`${m.parentId}\0${m.parentCallId}`)?.find((open) => !open.delegated) ?? this.#openTool(m.parentId, m.parentCallId, 'subagent', m.startTime, parent.child, false)
        call.delegated = true
        return call.context
      }
    }
    return context.active()
  }

  /** A call's start: it takes the span opened early for its nested child, if one waits, else opens its own. */
  #startTool(m: ToolMessage): void {
    const early = this.#tools.get(`${m.id}\0${m.callId}`)?.find((open) => !open.announced)
    if (!early) {
      this.#openTool(m.id, m.callId, m.name, m.startTime, m, true, m.arguments)
      return
    }
    early.announced = true
    early.span.updateName(`execute_tool ${m.name}`)
    early.span.setAttribute('gen_ai.tool.name', m.name)
    if (this.#captureContent) early.span.setAttribute('gen_ai.tool.call.arguments', m.arguments)
  }

  #openTool(childId: string, callId: string, name: string, startTime: number, child: ChildInfo, announced: boolean, args?: string): OpenCall {
    const parent = this.#agents.get(childId)?.context ?? context.active()
    const attributes = common(child, 'execute_tool')
    attributes['gen_ai.tool.name'] = name
    attributes['gen_ai.tool.call.id'] = callId
    if (this.#captureContent && args !== undefined) attributes['gen_ai.tool.call.arguments'] = args
    const span = this.#tracer.startSpan(`execute_tool ${name}`, { kind: SpanKind.INTERNAL, startTime, attributes }, parent)
    const open: OpenCall = { span, context: trace.setSpan(parent, span), announced, delegated: false }
    const key = `${childId}\0${callId}`
    const calls = this.#tools.get(key)
    if (calls) calls.push(open)
    else this.#tools.set(key, [open])
    return open
  }
}

/**
 * What every span of a child says: a fresh object the caller adds to. Assigned, not spread from
 * conditional temporaries, which cost more than the span's own bookkeeping (bench row O3).
 */
function common(m: ChildInfo, operation: string): Attributes {
  const attributes: Attributes = { 'gen_ai.operation.name': operation, 'gen_ai.conversation.id': m.id }
  if (m.modelProvider !== undefined) attributes['gen_ai.provider.name'] = m.modelProvider
  if (m.model !== undefined) attributes['gen_ai.request.model'] = m.model
  return attributes
}

function setUsage(span: Span, u: { inputTokens: number; outputTokens: number } | undefined): void {
  if (!u) return
  span.setAttribute('gen_ai.usage.input_tokens', u.inputTokens)
  span.setAttribute('gen_ai.usage.output_tokens', u.outputTokens)
}

function fail(span: Span, type: string, message?: string): void {
  span.setAttribute('error.type', type)
  span.setStatus({ code: SpanStatusCode.ERROR, ...(message === undefined ? {} : { message }) })
}

function part(block: ContentBlock): Record<string, unknown> {
  return block.type === 'text' ? { type: 'text', content: block.text } : { type: 'tool_call', id: block.id, name: block.name, arguments: block.arguments }
}
