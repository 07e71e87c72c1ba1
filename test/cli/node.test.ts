/** `subagent-worker node` as an operator meets it when Redis is not there: one clear line, a non-zero exit. */
import { execFile } from 'node:child_process'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { expect, it } from 'vitest'

const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url))

/** A loopback port nothing listens on: one the system just handed out and took back. */
async function closedPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise((resolve) => server.close(resolve))
  return port
}

it('an unreachable Redis is one line naming it and why, no stack trace, exit 1', async () => {
  const port = await closedPort()
  const failed = await promisify(execFile)(process.execPath, [CLI, 'node', '--redis', `redis://127.0.0.1:${port}`, '--name', 'lonely']).catch(
    (error: { code: number; stdout: string; stderr: string }) => error,
  )
  expect(failed).toMatchObject({ code: 1, stdout: '' })
  const { stderr } = failed as { stderr: string }
  expect(stderr).toMatch(new RegExp(`^subagent-worker node failed: node lonely could not reach Redis at redis://127\\.0\\.0\\.1:${port} within 5000 ms: .*ECONNREFUSED.*\\n$`))
  expect(stderr.split('\n')).toHaveLength(2)
}, 30_000) // the node waits redisTimeoutMs (5 s) by design; a loaded machine adds start-up
