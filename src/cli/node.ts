/** `subagent-worker node`: a worker node serving a BullMQ queue until SIGTERM or SIGINT. */
import { existsSync } from 'node:fs'
import { isAbsolute } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { codeOf, CommandFailure, UsageError } from './terminal/failure.js'
import { subagentError } from '../protocol/errors.js'

export const NODE_USAGE = `usage: subagent-worker node --redis URL [--queue NAME] [--max-threads N]
                            [--min-threads N] [--idle-timeout-ms MS] [--children-per-worker M]
                            [--nice-increment N] [--load-timeout-ms MS]
                            [--agent-module URL]... [--name NAME] [--shutdown-ms MS]
                            [--host-silence-ms MS]

Takes child jobs that hosts (createHost({ transport: bullmqTransport(...) })) put in the queue
and runs them on this machine's worker threads. Needs the bullmq and ioredis packages installed.

  --redis URL              redis://[user:password@]host:port[/db], or rediss:// for TLS
  --queue NAME             the queue to serve (default subagent-worker); hosts name the same
  --max-threads N          worker threads per delegation depth (default 1.5 × cores)
  --min-threads N          threads kept warm for the first depth (default cores / 2)
  --idle-timeout-ms MS     threads above --min-threads with no children exit after this
                           (default 10000)
  --children-per-worker M  children sharing one thread (default 1)
  --load-timeout-ms MS     how long a new thread may take to load a host's agent module; past
                           it the thread is stopped and its children fail (default 30000)
  --nice-increment N       how much lower than the node's main thread its threads are
                           scheduled, 0-19 (default 0; Linux only)
  --agent-module URL       an agent module hosts may name (createHost's agentModule), as a
                           file URL or absolute path; repeat for several. The node loads no
                           other code, and a host that names none gets none
  --name NAME              how diagnostics name this node: printable ASCII, no spaces
                           (default host-pid-random)
  --shutdown-ms MS         on SIGTERM/SIGINT, how long running children may finish before
                           they end aborted (default 10000)
  --host-silence-ms MS     how long a host may be silent before its children are let go
                           (default 5000)
  --help                   this text
`

const OPTIONS = {
  redis: { type: 'string' },
  queue: { type: 'string' },
  'max-threads': { type: 'string' },
  'min-threads': { type: 'string' },
  'idle-timeout-ms': { type: 'string' },
  'children-per-worker': { type: 'string' },
  'nice-increment': { type: 'string' },
  'load-timeout-ms': { type: 'string' },
  'agent-module': { type: 'string', multiple: true },
  name: { type: 'string' },
  'shutdown-ms': { type: 'string' },
  'host-silence-ms': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const

export async function runNode(argv: string[]): Promise<void> {
  let values: ReturnType<typeof parse>['values']
  try {
    values = parse(argv).values
  } catch (error) {
    throw new UsageError((error as Error).message)
  }
  if (values.help) return void process.stdout.write(NODE_USAGE)
  if (!values.redis) throw new UsageError('--redis URL is required (for example --redis redis://127.0.0.1:6379)')
  // A node loads its modules only when a host's child asks, so a mistyped path would show up then, on the host.
  for (const module of values['agent-module'] ?? []) {
    const path = localPath(module)
    if (path !== undefined && !existsSync(path)) throw new UsageError(`--agent-module ${module}: no such file`)
  }
  const { startNode } = await loadBullmq()
  const shutdownMs = whole('--shutdown-ms', values['shutdown-ms']) ?? 10_000
  const node = await startNode({
    connection: values.redis,
    ...(values.queue === undefined ? {} : { queue: values.queue }),
    agentModules: values['agent-module'] ?? [],
    pool: {
      maxThreads: whole('--max-threads', values['max-threads']),
      minThreads: whole('--min-threads', values['min-threads']),
      idleTimeoutMs: whole('--idle-timeout-ms', values['idle-timeout-ms']),
      childrenPerWorker: whole('--children-per-worker', values['children-per-worker']),
      niceIncrement: whole('--nice-increment', values['nice-increment']),
      loadTimeoutMs: whole('--load-timeout-ms', values['load-timeout-ms']),
    },
    ...(values.name === undefined ? {} : { name: values.name }),
    ...(values['host-silence-ms'] === undefined ? {} : { hostSilenceMs: whole('--host-silence-ms', values['host-silence-ms']) }),
  }).catch((error: unknown) => {
    // An option the node refused is the command line's (the cli entry says so, exit 2).
    if (codeOf(error) === 'ERR_SUBAGENT_OPTION') throw error
    // Why the node could not start (no Redis, a refused password, a bad module) is its message; a stack says nothing more.
    throw new CommandFailure(error instanceof Error ? error.message : String(error), { cause: error })
  })
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGTERM', stop)
      process.off('SIGINT', stop)
      process.stdout.write(`node ${node.id} shutting down: running children have ${shutdownMs} ms\n`)
      void node.close(shutdownMs).then(resolve)
    }
    process.on('SIGTERM', stop)
    process.on('SIGINT', stop)
    // Said once a signal shuts it down gracefully: whoever reads the line may stop it at once.
    process.stdout.write(`node ${node.id} serving queue ${values.queue ?? 'subagent-worker'}, ${node.capacity} children per depth\n`)
  })
}

/** The file a module names on this machine: an absolute path's, a file URL's; undefined for anything else (the library's option check names that). */
function localPath(module: string): string | undefined {
  if (isAbsolute(module)) return module
  if (!module.startsWith('file:')) return undefined
  try {
    return fileURLToPath(module)
  } catch {
    return undefined
  }
}

function parse(argv: string[]) {
  return parseArgs({ args: argv, options: OPTIONS, strict: true, allowPositionals: false })
}

function whole(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined
  const number = Number(value)
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(number)) throw new UsageError(`${flag} must be a whole number, not ${JSON.stringify(value)}`)
  return number
}

/** The node command is the one that needs the optional peers: say so plainly when they are missing. */
async function loadBullmq(): Promise<typeof import('../bullmq/index.js')> {
  try {
    return await import('../bullmq/index.js')
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_MODULE_NOT_FOUND' && /bullmq|ioredis/.test((error as Error).message)) {
      throw subagentError('ERR_SUBAGENT_PEER_MISSING', 'the node command needs the bullmq and ioredis packages: npm install bullmq ioredis')
    }
    throw error
  }
}
