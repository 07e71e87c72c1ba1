#!/usr/bin/env node
/** The `subagent-worker` command. */
import { CommandFailure, UsageError } from './terminal/failure.js'

const USAGE = `usage: subagent-worker <command>

commands:
  demo     parallel delegations on worker threads with the scripted model (what npm start runs)
  bench    inline vs worker benchmarks with goals (what npm run bench runs; --help for its flags)
  node     a worker node: runs children queued by hosts on BullMQ/Redis (needs bullmq and ioredis; --help)
  mcp      the subagent and job tools as an MCP server on stdio (needs @modelcontextprotocol/sdk; --help)
`

const [command = 'demo', ...rest] = process.argv.slice(2)
// Each command is loaded on demand: a node or an MCP server does not load the bench's harness, and
// bullmq and ioredis (optional peers) are loaded by the node command alone.
const commands: Record<string, (args: string[]) => Promise<void>> = {
  demo: async () => (await import('./demo.js')).runDemo(),
  bench: async (args) => (await import('./bench/index.js')).runBench(args),
  node: async (args) => (await import('./node.js')).runNode(args),
  mcp: async (args) => (await import('./mcp.js')).runMcp(args),
}

const run = commands[command]
if (!run || command === 'help' || command === '--help') {
  process.stdout.write(USAGE)
  process.exitCode = run || command === 'help' || command === '--help' ? 0 : 2
} else {
  run(rest).catch((error: unknown) => {
    // A bad command line is the caller's mistake (exit 2, no stack); anything else is a failure (exit 1).
    if (error instanceof UsageError) {
      process.stderr.write(`subagent-worker ${command}: ${error.message}\nrun \`subagent-worker ${command} --help\` for the flags\n`)
      process.exitCode = 2
      return
    }
    const why = error instanceof CommandFailure ? error.message : error instanceof Error ? (error.stack ?? error.message) : String(error)
    process.stderr.write(`subagent-worker ${command} failed: ${why}\n`)
    process.exitCode = 1
  })
}
