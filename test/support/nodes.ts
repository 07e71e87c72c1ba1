/** Worker nodes for the tests: `subagent-worker node` processes started from the built CLI. */
import { spawn, type ChildProcess } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url))
const FIXTURES = fileURLToPath(new URL('../fixtures/', import.meta.url))

/** Every fixture module, so a node serves whichever one a test's host names. */
export const FIXTURE_MODULES = readdirSync(FIXTURES)
  .filter((file) => file.endsWith('-module.mjs') || file === 'module-tool.mjs')
  .map((file) => `${FIXTURES}${file}`)

export interface TestNode {
  readonly process: ChildProcess
  readonly id: string
  /** Resolves once the node process exited. */
  readonly exited: Promise<void>
  /** What the node printed so far (stdout and stderr). */
  output(): string
  /** SIGTERM, then SIGKILL if it is still there after `ms`; resolves once it exited. */
  stop(ms?: number): Promise<void>
}

export interface NodeArgs {
  redis: string
  queue: string
  maxThreads?: number
  childrenPerWorker?: number
  modules?: string[]
  extra?: string[]
  env?: NodeJS.ProcessEnv
}

/** Starts a node and resolves once it serves its queue; rejects with its output if it exits first. */
export function startTestNode(args: NodeArgs): Promise<TestNode> {
  const argv = [CLI, 'node', '--redis', args.redis, '--queue', args.queue, '--max-threads', String(args.maxThreads ?? 3), '--children-per-worker', String(args.childrenPerWorker ?? 4)]
  for (const module of args.modules ?? FIXTURE_MODULES) argv.push('--agent-module', module)
  argv.push(...(args.extra ?? []))
  const child = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'pipe'], env: args.env ?? process.env })
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  return new Promise((resolve, reject) => {
    const onData = () => {
      const match = /^node (\S+) serving queue/m.exec(output)
      if (!match) return
      child.stdout.off('data', onData)
      resolve({
        process: child,
        id: match[1]!,
        exited,
        output: () => output,
        async stop(ms = 5000) {
          if (child.exitCode !== null || child.signalCode !== null) return
          child.kill('SIGTERM')
          const timer = setTimeout(() => child.kill('SIGKILL'), ms)
          await exited
          clearTimeout(timer)
        },
      })
    }
    child.stdout.on('data', onData)
    child.once('exit', (code, signal) => reject(new Error(`the node exited (${code ?? signal}) before serving:\n${output}`)))
  })
}
