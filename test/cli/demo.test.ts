/** `npm start` is the first thing a user runs: the demo must exit 0 and print its summary table. */
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { expect, it } from 'vitest'

const MAIN = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url))

it('the demo exits 0 with its summary table and the isolation figure', async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [MAIN, 'demo'], { timeout: 90_000, env: { ...process.env, NO_COLOR: '1' } })
  expect(stdout).toMatch(/^child\s+thread\s+stop\s+structured result or diagnostic\s+time$/m)
  expect(stdout).toMatch(/^runaway\s+\d+\s+aborted\s+the child did not stop within abortGraceMs/m)
  expect(stdout).toMatch(/^crash\s+\d+\s+error\s+the child's worker thread crashed/m)
  expect(stdout).toMatch(/^fork\s+\d+\s+completed\s+"From the parent’s conversation: the codename is Bluebird\."/m)
  expect(stdout.match(/^doc-\d\d\s+\d+\s+completed\s+\{"title":"doc-\d\d","words":\d+,"sentences":\d+,"thread":\d+\}/gm)).toHaveLength(24)
  expect(stdout).toMatch(/worker\/inline \d+\.\d\d×/)
  expect(stdout).not.toMatch(/\u001b\[/) // no colour when not on a TTY
}, 100_000)
