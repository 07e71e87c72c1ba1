#!/usr/bin/env node
/** The `subagent-worker` command. */
import { codeOf, CommandFailure, UsageError } from './terminal/failure.js'

const USAGE = `usage: subagent-worker <command>

commands:
  demo     parallel delegations on worker threads with the scripted model (the default; what
           npm start runs)
  bench    benchmarks inline, on worker threads, in child processes and on BullMQ nodes, with
           goals (what npm run bench runs; --help for its flags)
  node     a worker node: runs children queued by hosts on BullMQ/Redis (needs bullmq and ioredis; --help)
  mcp      the subagent and job tools as an MCP server on stdio (needs @modelcontextprotocol/sdk; --help)
`

const [command = 'demo', ...rest] = process.argv.slice(2)
// Each command is loaded on demand: a node or an MCP server does not load the bench's harness, and
// bullmq and ioredis (optional peers) are loaded by the node command alone.
const commands: Record<string, (args: string[]) => Promise<void>> = {
  demo: async (args) => (await import('./demo.js')).runDemo(args),
  bench: async (args) => (await import('./bench/index.js')).runBench(args),
  node: async (args) => (await import('./node.js')).runNode(args),
  mcp: async (args) => (await import('./mcp.js')).runMcp(args),
}

// Output piped into a reader that stops early (`| head`) is not a failure: end quietly.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error
  process.exit(process.exitCode ?? 0)
})

const HELP = new Set(['help', '--help', '-h'])
const run = commands[command]
if (HELP.has(command)) {
  process.stdout.write(USAGE)
} else if (!run) {
  process.stderr.write(`subagent-worker: unknown command "${command}"\n${USAGE}`)
  process.exitCode = 2
} else {
  run(rest).catch((error: unknown) => {
    // A bad command line is the caller's mistake (exit 2, no stack): a flag the command refused, or
    // a value the library's option check refused (it names the option). Anything else is a failure (exit 1).
    if (error instanceof UsageError || codeOf(error) === 'ERR_SUBAGENT_OPTION') {
      process.stderr.write(`subagent-worker ${command}: ${(error as Error).message}\nrun \`subagent-worker ${command} --help\` for the flags\n`)
      process.exitCode = 2
      return
    }
    // The library's own errors (a stable code) say what went wrong and what to do: no stack.
    const why = error instanceof CommandFailure || codeOf(error) !== undefined ? (error as Error).message : error instanceof Error ? (error.stack ?? error.message) : String(error)
    process.stderr.write(`subagent-worker ${command} failed: ${why}\n`)
    process.exitCode = 1
  })
}
