/**
 * `subagent-worker demo`: what the library is for, on the built-in scripted model (no key, no
 * network). Dozens of parallel delegations with structured results across worker threads, a
 * runaway child stopped after the grace, a crashing child contained while the others finish,
 * a forked child that builds on its parent's conversation, and the isolation overhead of the
 * same delegations run inline.
 */
import {
  createHost,
  isEvent,
  ScriptedModel,
  textResponse,
  toolCallResponse,
  type Agent,
  type EventOf,
  type Host,
  type ModelRequest,
  type ScriptEntry,
  type StreamChunk,
  type SubagentResult,
} from '../index.js'
import { UsageError } from './terminal/failure.js'
import { clip, ms, styleFor, table } from './terminal/format.js'

const MODULE = new URL('./demo-module.js', import.meta.url)
const DOCUMENTS = 24
const GRACE_MS = 500
const TOPICS = ['threads', 'ports', 'pools', 'grace periods', 'transcripts', 'schemas', 'forks', 'depth limits']
const SCHEMA = {
  type: 'object',
  properties: { title: { type: 'string' }, words: { type: 'integer' }, sentences: { type: 'integer' }, thread: { type: 'integer' } },
  required: ['title', 'words', 'sentences', 'thread'],
  additionalProperties: false,
}

interface Row {
  child: string
  started: number
  result?: SubagentResult
  thread?: number
  time?: number
}

function documentText(i: number): string {
  const topic = TOPICS[i % TOPICS.length]!
  const sentences = 2 + (i % 4)
  return Array.from({ length: sentences }, (_, s) => `Note ${s + 1} on ${topic} covers case ${i * 7 + s}.`).join(' ')
}

/** Latency the scripted model pretends to have, so the run looks like real model calls. */
const latency = (i: number, step: number) => 40 + ((i * 37 + step * 53) % 90)

/** Reads the last tool result a request carries (the model "sees" the conversation). */
function lastToolValue(request: ModelRequest): Record<string, unknown> {
  for (let i = request.messages.length - 1; i >= 0; i--) {
    const message = request.messages[i]!
    if (message.role === 'tool') return JSON.parse(message.content.map((b) => (b.type === 'text' ? b.text : '')).join(''))
  }
  return {}
}

/** A document child: measure the text with a module tool, then report through structured_output. */
function documentScript(i: number): ScriptEntry[] {
  const text = documentText(i)
  return [
    { delayMs: latency(i, 0), chunks: toolCallResponse('measure-1', 'measure', { text }) },
    async (request): Promise<StreamChunk[]> => {
      await new Promise((resolve) => setTimeout(resolve, latency(i, 1)))
      const measured = lastToolValue(request)
      return toolCallResponse('report-1', 'structured_output', { title: `doc-${String(i + 1).padStart(2, '0')}`, ...measured })
    },
  ]
}

async function delegate(host: Host, parent: Agent, name: string, provider: string, row: Row, extra: { outputSchema?: object; signal?: AbortSignal; fork?: boolean } = {}) {
  const provide = extra.fork ? host.fork : host.spawn
  const run = await provide.start({
    prompt: `Task ${name}`,
    parent,
    signal: extra.signal ?? new AbortController().signal,
    label: name,
    agentOptions: { provider },
    ...(extra.outputSchema ? { outputSchema: extra.outputSchema } : {}),
  })
  try {
    row.result = await run.result
    row.time = performance.now() - row.started
    const measured = host.agents.get(run.id)?.session.events.find((e): e is EventOf<'tool/result'> => isEvent(e, 'tool/result') && e.data.name === 'measure')
    // The measure tool's own value, as demo-module.ts returns it.
    const value = measured?.data.value as { thread?: number } | undefined
    if (value?.thread !== undefined) row.thread = value.thread
  } finally {
    await run.dispose()
  }
}

/** Documents share threads (six children a worker) for throughput. */
function demoHost(isolation: 'worker' | 'inline'): { host: Host; parent: Agent } {
  const host = createHost({ isolation, agentModule: MODULE, abortGraceMs: GRACE_MS, pool: { minThreads: 4, maxThreads: 4, childrenPerWorker: 6 } })
  host.models.register('parent', new ScriptedModel([textResponse('Noted: the project codename is Bluebird.')]))
  return { host, parent: host.createAgent({ options: { provider: 'parent', model: 'scripted' } }) }
}

/** A few untimed delegations first, so every thread has loaded the agent module: the comparison is of warm pools. */
async function warmUp(host: Host, parent: Agent): Promise<void> {
  host.models.register('warm-up', new ScriptedModel(Array.from({ length: 8 }, () => textResponse('ready'))))
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      const run = await host.spawn.start({ prompt: 'warm up', parent, signal: new AbortController().signal, agentOptions: { provider: 'warm-up' } })
      await run.result
      await run.dispose()
    }),
  )
}

function startDocuments(host: Host, parent: Agent, rows: Row[], onSettled: () => void): Promise<unknown> {
  const started = performance.now()
  return Promise.all(
    Array.from({ length: DOCUMENTS }, (_, i) => {
      host.models.register(`doc-${i}`, new ScriptedModel(documentScript(i)))
      const row: Row = { child: `doc-${String(i + 1).padStart(2, '0')}`, started }
      rows.push(row)
      return delegate(host, parent, row.child, `doc-${i}`, row, { outputSchema: SCHEMA }).finally(onSettled)
    }),
  )
}

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 10))
}

export const DEMO_USAGE = `usage: subagent-worker demo

Runs ${DOCUMENTS} document delegations, a runaway, a crash and a fork on worker threads with the
built-in scripted model (no key, no network), then the same delegations inline. It takes no flags.
`

export async function runDemo(args: string[]): Promise<void> {
  if (args.length === 1 && (args[0] === '--help' || args[0] === '-h')) return void process.stdout.write(DEMO_USAGE)
  if (args.length > 0) throw new UsageError(`the demo takes no arguments, not "${args.join(' ')}"`)
  const out = process.stdout
  const style = styleFor(out)
  const live = Boolean(process.stderr.isTTY)
  out.write(`${style.bold('subagent-worker demo')}  ${style.dim(`${DOCUMENTS} document delegations + a runaway, a crash and a fork, on worker threads (scripted model, no network)`)}\n\n`)

  const rows: Row[] = []
  let settled = 0
  const total = DOCUMENTS + 3
  const progress = () => {
    settled++
    if (live) process.stderr.write(`\r  ${style.cyan('▸')} ${settled}/${total} children settled`)
  }

  const t0 = performance.now()
  const { host, parent } = demoHost('worker')
  await warmUp(host, parent)

  // The fork builds on the parent's conversation: the parent learns a fact first.
  parent.followup('Remember this: the project codename is Bluebird.')
  await parent.whenIdle()
  const { guarded, runaway } = guardedHost()

  const stopRunaway = new AbortController()
  const special: Array<[string, { signal?: AbortSignal; fork?: boolean }]> = [
    ['runaway', { signal: stopRunaway.signal }],
    ['crash', {}],
    ['fork', { fork: true }],
  ]
  const extras = special.map(([name, extra]) => {
    const row: Row = { child: name, started: performance.now() }
    rows.push(row)
    // Any agent-shaped parent works, even one from another host: the fork copies its turns.
    return delegate(guarded, parent, name, name, row, extra).finally(progress)
  })
  const all = startDocuments(host, parent, rows, progress)
  // Cancel the runaway once it is looping; it never checks, so only its thread's end stops it.
  await until(() => runaway.requests.length === 2)
  setTimeout(() => stopRunaway.abort(), 100)
  await Promise.all([all, ...extras])
  const workerTime = Math.max(...rows.filter((r) => r.child.startsWith('doc-')).map((r) => r.time ?? 0))
  await Promise.all([host.close(), guarded.close()])
  if (live) process.stderr.write('\r\u001b[K')

  const inlineTime = await inlineDocumentsTime()
  report(rows, { workerTime, inlineTime, totalTime: performance.now() - t0 })
}

/** The host of the risky children: a fork of the parent's conversation, a runaway and a crash. */
function guardedHost(): { guarded: Host; runaway: ScriptedModel } {
  const forkModel = new ScriptedModel([
    { delayMs: 60, chunks: toolCallResponse('measure-1', 'measure', { text: 'What did my parent learn?' }) },
    (request): StreamChunk[] => {
      const seen = request.messages.some((m) => m.role === 'user' && m.content.some((b) => b.type === 'text' && b.text.includes('Bluebird')))
      return textResponse(seen ? 'From the parent’s conversation: the codename is Bluebird.' : 'I was not told a codename.')
    },
  ])
  // The risky children get a thread each (the default), so a crash or a kill touches no one else.
  const guarded = createHost({ agentModule: MODULE, abortGraceMs: GRACE_MS, pool: { minThreads: 3, maxThreads: 3 } })
  guarded.models.register('fork', forkModel)
  const runaway = new ScriptedModel([toolCallResponse('measure-1', 'measure', { text: 'about to loop' }), toolCallResponse('loop-1', 'runaway', {})])
  guarded.models.register('runaway', runaway)
  guarded.models.register('crash', new ScriptedModel([
    toolCallResponse('measure-1', 'measure', { text: 'about to crash' }),
    toolCallResponse('crash-1', 'crash', {}),
    { delayMs: 5_000, chunks: textResponse('unreachable') },
  ]))
  return { guarded, runaway }
}

/** The same document delegations inline, for the overhead figure (a runaway inline could not be stopped). */
async function inlineDocumentsTime(): Promise<number> {
  const inlineRows: Row[] = []
  const inline = demoHost('inline')
  await warmUp(inline.host, inline.parent)
  await startDocuments(inline.host, inline.parent, inlineRows, () => {})
  await inline.host.close()
  return Math.max(...inlineRows.map((r) => r.time ?? 0))
}

/** The table of children and the two timing lines. */
function report(rows: readonly Row[], { workerTime, inlineTime, totalTime }: { workerTime: number; inlineTime: number; totalTime: number }): void {
  const out = process.stdout
  const style = styleFor(out)
  const stop = (reason: string) => (reason === 'completed' ? style.green(reason) : reason === 'aborted' ? style.yellow(reason) : style.red(reason))
  const body = rows.map((row) => {
    const result = row.result
    const detail = !result
      ? 'no result'
      : result.structured !== undefined
        ? JSON.stringify(result.structured)
        : result.stopReason === 'completed'
          ? JSON.stringify(result.output.map((b) => (b.type === 'text' ? b.text : '')).join(''))
          : (result.diagnostic ?? '')
    return [row.child, row.thread === undefined ? '-' : String(row.thread), stop(result?.stopReason ?? 'error'), clip(detail, 96), ms(row.time ?? 0)]
  })
  out.write(`${table(['child', 'thread', 'stop', 'structured result or diagnostic', 'time'], body, style)}\n\n`)
  out.write(`${style.bold('Isolation')}: ${DOCUMENTS} document delegations took ${ms(workerTime)} on four warm worker threads (six children a thread) and ${ms(inlineTime)} inline (worker/inline ${(workerTime / inlineTime).toFixed(2)}×).\n`)
  out.write(`${style.dim(`The runaway was stopped ${GRACE_MS} ms after its cancel by terminating its thread; the crash took down only its own thread. Total ${ms(totalTime)}.`)}\n`)
}
