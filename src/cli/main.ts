#!/usr/bin/env node
/** The `subagent-worker` command. */
import { runDemo } from './demo.js'

const USAGE = `usage: subagent-worker <command>

commands:
  demo     parallel delegations on worker threads with the scripted model (what npm start runs)
`

const [command = 'demo', ...rest] = process.argv.slice(2)
const commands: Record<string, (args: string[]) => Promise<void>> = {
  demo: () => runDemo(),
}

const run = commands[command]
if (!run || command === 'help' || command === '--help') {
  process.stdout.write(USAGE)
  process.exitCode = run || command === 'help' || command === '--help' ? 0 : 2
} else {
  run(rest).catch((error: unknown) => {
    process.stderr.write(`subagent-worker ${command} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
    process.exitCode = 1
  })
}
