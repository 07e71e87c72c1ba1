/**
 * One tool call, the same wherever it runs (the agent loop, the host serving a runner's call of a
 * host tool, the AI SDK adapter): its arguments parsed, the call refused or executed, the value
 * bounded and rendered, and any failure turned into the `ToolError` whose text the model reads.
 * The callers differ only in how they find the tool and what they do with the outcome.
 */
import type { ContentBlock } from '../../protocol/shapes/content.js'
import { MAX_VALUE_DEPTH, withinDepth } from '../../protocol/values.js'
import { messageOf } from '../../protocol/errors.js'
import { isToolErrorCode } from '../../protocol/validators.js'
import { argumentValidator, describeErrors } from './schema.js'
import { ToolError, type ToolDefinition, type ToolExecution } from './tools.js'
import { withDelegatingCall } from './delegating-call.js'

/** A call that ran and was rendered, or the error the model reads instead. */
export type ToolCallOutcome = { ok: true; content: ContentBlock[]; value: unknown } | { ok: false; error: ToolError }

/** A tool's own outcome before rendering; `thrown` is what the tool threw, kept as the cause. */
export type Executed = { ok: true; value: unknown } | { ok: false; error: ToolError; thrown?: unknown }

/** The arguments of a call as the model wrote them: empty text means no arguments. */
function parseArguments(name: string, text: string): { args: unknown } | ToolError {
  try {
    return { args: text.trim() === '' ? {} : JSON.parse(text) }
  } catch {
    return new ToolError(`arguments for "${name}" are not valid JSON`, 'INVALID_ARGS')
  }
}

/** The refusal of a call to a tool the agent cannot see (unknown, or filtered out). */
export function unknownTool(name: string): ToolError {
  return new ToolError(`unknown tool "${name}"`, 'UNKNOWN_TOOL')
}

/** The check of a tool's arguments against its schema, compiled now: the refusal of arguments that do not match. */
export function argumentsCheck(tool: Pick<ToolDefinition, 'name' | 'parameters'>): (args: unknown) => ToolError | undefined {
  const validate = argumentValidator(tool.parameters)
  return (args) => (validate(args) ? undefined : new ToolError(`invalid arguments for "${tool.name}": ${describeErrors(validate)}`, 'INVALID_ARGS'))
}

/**
 * Why a call of `tool` with these parsed arguments must not run, as the model will read it; or
 * undefined when it may run. The loop asks before running a tool, and the host asks again before
 * running a host tool for a child on another thread, so both refuse alike.
 */
export function refusalOf(tool: ToolDefinition, args: unknown, delegated: boolean): ToolError | undefined {
  if (!withinDepth(args)) return new ToolError(`arguments for "${tool.name}" are nested deeper than ${MAX_VALUE_DEPTH} levels`, 'INVALID_ARGS')
  const invalid = argumentsCheck(tool)(args)
  if (invalid) return invalid
  if (tool.needsApproval && delegated) {
    return new ToolError(`tool "${tool.name}" needs approval, which a delegated subagent cannot ask for; report that it could not be run`, 'DENIED')
  }
  return undefined
}

/**
 * A call as a model wrote it (its arguments as JSON text) to the tool its name found, if any; the
 * arguments come back parsed when they could be, as hooks see them.
 */
export async function runModelCall(
  tool: ToolDefinition | undefined,
  call: { name: string; arguments: string },
  exec: ToolExecution,
  delegated: boolean,
): Promise<{ outcome: ToolCallOutcome; args: unknown }> {
  if (!tool) return { outcome: { ok: false, error: unknownTool(call.name) }, args: call.arguments }
  const parsed = parseArguments(call.name, call.arguments)
  if (parsed instanceof ToolError) return { outcome: { ok: false, error: parsed }, args: call.arguments }
  return { outcome: await runToolCall(tool, parsed.args, exec, delegated), args: parsed.args }
}

/** Refuses, executes and renders one call with parsed arguments. */
export async function runToolCall(tool: ToolDefinition, args: unknown, exec: ToolExecution, delegated: boolean): Promise<ToolCallOutcome> {
  const refusal = refusalOf(tool, args, delegated)
  if (refusal) return { ok: false, error: refusal }
  const executed = await executeTool(tool, args, exec)
  if (!executed.ok) return { ok: false, error: executed.error }
  // A value its render (or JSON) cannot write is the tool's failure, as a throw is: the turn goes on.
  try {
    return { ok: true, ...renderToolValue(tool, executed.value) }
  } catch (thrown) {
    return { ok: false, error: failed(tool.name, thrown) }
  }
}

/** Executes an admitted call; its value must be bounded, since it is recorded or crosses a boundary. */
export async function executeTool<Args>(tool: ToolDefinition<Args>, args: unknown, exec: ToolExecution): Promise<Executed> {
  try {
    const value = await withDelegatingCall({ parentId: exec.agent.id, callId: exec.callId }, () => tool.execute(args as Args, exec))
    return withinDepth(value) ? { ok: true, value } : { ok: false, error: valueTooDeep(tool.name) }
  } catch (thrown) {
    // A ToolError's text is the model's to read as it is; a code it may not carry is a plain failure's.
    const error = thrown instanceof ToolError ? (isToolErrorCode(thrown.code) ? thrown : new ToolError(thrown.message)) : failed(tool.name, thrown)
    return { ok: false, error, thrown }
  }
}

function failed(name: string, thrown: unknown): ToolError {
  return new ToolError(`tool "${name}" failed: ${thrownText(thrown)}`)
}

/** A tool value too deep to be recorded or to cross a boundary. */
function valueTooDeep(name: string): ToolError {
  return new ToolError(`tool "${name}" returned a value nested deeper than ${MAX_VALUE_DEPTH} levels, which cannot be recorded`)
}

/** A value whose text was already rendered elsewhere (a host tool called from a worker thread). */
export class RenderedValue {
  constructor(
    readonly value: unknown,
    readonly text: string,
  ) {}
}

/** The text the model sees: the tool's `render`, else strings as-is and anything else as JSON. */
export function renderText(tool: Pick<ToolDefinition, 'render'>, value: unknown): string {
  if (value instanceof RenderedValue) return value.text
  if (tool.render) return tool.render(value)
  return typeof value === 'string' ? value : (JSON.stringify(value) ?? '')
}

export function renderToolValue(tool: ToolDefinition, value: unknown): { content: ContentBlock[]; value: unknown } {
  const text = renderText(tool, value)
  return { content: [{ type: 'text', text }], value: value instanceof RenderedValue ? value.value : value }
}

/** The host option that grants what Node's permission model denied (process transport). */
const GRANTED_BY: Record<string, string> = {
  FileSystemRead: 'sandbox.fsRead',
  FileSystemWrite: 'sandbox.fsWrite',
  ChildProcess: 'sandbox.childProcess',
  WorkerThreads: 'sandbox.worker',
}

/** A tool's thrown error as the model reads it; a sandbox denial names the permission, what it guarded and the grant. */
function thrownText(error: unknown): string {
  const { code, permission, resource } = (error ?? {}) as { code?: unknown; permission?: unknown; resource?: unknown }
  if (code === 'ERR_DLOPEN_DISABLED') return 'ERR_DLOPEN_DISABLED: the sandbox does not grant loading native addons (sandbox.addons)'
  if (code !== 'ERR_ACCESS_DENIED') return messageOf(error)
  // Some refusals name no permission (fs.symlink wants full read and write): Node's message says what is missing.
  if (typeof permission !== 'string' || permission === '') return `ERR_ACCESS_DENIED: the sandbox does not grant this operation (${messageOf(error)}) (sandbox.fsRead and sandbox.fsWrite)`
  const where = typeof resource === 'string' && resource !== '' ? ` on ${resource}` : ''
  const grant = GRANTED_BY[permission] ? ` (${GRANTED_BY[permission]})` : ''
  return `ERR_ACCESS_DENIED: the sandbox does not grant ${permission}${where}${grant}`
}
