/** The `subagent-worker` command line as a user meets its mistakes: one clear message, exit 2, no stack. */
import { execFile, spawn } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { expect, it } from 'vitest'

const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url))

/** Runs the CLI; resolves with its exit code and output, whatever the code. */
async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return promisify(execFile)(process.execPath, [CLI, ...args]).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, stdout: error.stdout, stderr: error.stderr }),
  )
}

it('an unknown command says so, with the usage, on stderr: exit 2; -h is help', async () => {
  const unknown = await cli('bogus')
  expect(unknown).toMatchObject({ code: 2, stdout: '' })
  expect(unknown.stderr).toMatch(/^subagent-worker: unknown command "bogus"\nusage: subagent-worker <command>/)
  expect(await cli('-h')).toMatchObject({ code: 0, stdout: expect.stringMatching(/^usage: subagent-worker <command>/), stderr: '' })
})

it("a value the library's option check refuses is a bad command line: its message and the --help hint, exit 2, no stack", async () => {
  const refused = await cli('node', '--redis', 'redis://127.0.0.1:1', '--max-threads', '0')
  expect(refused).toMatchObject({ code: 2, stdout: '' })
  expect(refused.stderr).toBe('subagent-worker node: pool.maxThreads must be a whole number from 1 to 1024, not 0\nrun `subagent-worker node --help` for the flags\n')
}, 30_000)

it('the demo takes no arguments: --help says what it does, anything else is a bad command line', async () => {
  expect(await cli('demo', '--help')).toMatchObject({ code: 0, stdout: expect.stringMatching(/^usage: subagent-worker demo\n/), stderr: '' })
  const refused = await cli('demo', '--quick')
  expect(refused).toMatchObject({ code: 2, stdout: '' })
  expect(refused.stderr).toBe('subagent-worker demo: the demo takes no arguments, not "--quick"\nrun `subagent-worker demo --help` for the flags\n')
})

it('a --redis that is not a redis:// URL is refused at once (ioredis would read it as a socket path): exit 2', async () => {
  const refused = await cli('node', '--redis', 'http://127.0.0.1:6379')
  expect(refused).toMatchObject({ code: 2, stdout: '' })
  expect(refused.stderr).toMatch(/^subagent-worker node: connection must be a redis:\/\/ or rediss:\/\/ URL, or ioredis options/)
}, 30_000)

it('a node given an agent module that is not there says so at once, not when a host first asks: exit 2', async () => {
  const refused = await cli('node', '--redis', 'redis://127.0.0.1:1', '--agent-module', '/nonexistent/agent.js')
  expect(refused).toMatchObject({ code: 2, stdout: '' })
  expect(refused.stderr).toBe('subagent-worker node: --agent-module /nonexistent/agent.js: no such file\nrun `subagent-worker node --help` for the flags\n')
}, 30_000)

it('output its reader stopped taking (`| head`) ends the command quietly: exit 0, no stack', async () => {
  const demo = spawn(process.execPath, [CLI, 'demo'], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } })
  let stderr = ''
  demo.stderr.on('data', (chunk: Buffer) => (stderr += chunk))
  await once(demo.stdout, 'data')
  demo.stdout.destroy()
  const [code] = await once(demo, 'exit')
  expect({ code, stderr }).toEqual({ code: 0, stderr: '' })
}, 90_000)
