/**
 * The package as a user meets it from source: the tracked files of this repository (what a
 * fresh clone has: no dist/), packed with `npm pack` WITHOUT building first, the tarball
 * installed into a fresh project by npm, every subpath export imported and the bin run. The
 * tarball test beside this one packs the already built tree; this one is how a missing
 * `prepare` script shows up (a tarball of sources only).
 *
 * The clone borrows this repository's node_modules (the build's compiler) instead of `npm ci`,
 * and the consumer install prefers npm's cache, so the file runs offline once the cache holds
 * the packages.
 */
import { execFile } from 'node:child_process'
import { copyFile, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises'
import { existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const run = promisify(execFile)
const ROOT = fileURLToPath(new URL('../..', import.meta.url))
// The optional peers the subpaths need, at the versions this repository tests with.
const PEERS = ['ai', 'bullmq', 'ioredis']

let scratch: string
let consumer: string
let packed: string[]

/** The files a clone of the working tree has: git's tracked files, as they are on disk. */
async function cloneTracked(into: string): Promise<void> {
  const { stdout } = await run('git', ['ls-files', '-z'], { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 })
  for (const file of stdout.split('\0').filter((name) => name !== '' && existsSync(join(ROOT, name)))) {
    await mkdir(dirname(join(into, file)), { recursive: true })
    await copyFile(join(ROOT, file), join(into, file))
  }
  await symlink(join(ROOT, 'node_modules'), join(into, 'node_modules'), 'dir')
}

async function installedVersion(name: string): Promise<string> {
  return (JSON.parse(await readFile(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version
}

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'subagent-worker-clone-'))
  const clone = join(scratch, 'clone')
  consumer = join(scratch, 'consumer')
  await cloneTracked(clone)
  await mkdir(consumer)
  expect(existsSync(join(clone, 'dist')), 'a clone starts without a build').toBe(false)

  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', consumer], { cwd: clone, maxBuffer: 16 * 1024 * 1024 })
  const [{ filename, files }] = JSON.parse(stdout) as [{ filename: string; files: Array<{ path: string }> }]
  packed = files.map((file) => file.path)

  await writeFile(join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }))
  const peers = await Promise.all(PEERS.map(async (name) => `${name}@${await installedVersion(name)}`))
  await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', join(consumer, filename), ...peers], { cwd: consumer })
}, 120_000)

afterAll(() => rm(scratch, { recursive: true, force: true }))

describe('a tarball packed from a clean clone', () => {
  it('carries the build: npm pack builds the package itself', () => {
    for (const file of ['dist/index.js', 'dist/index.d.ts', 'dist/ai-sdk/index.js', 'dist/bullmq/index.js', 'dist/cli/main.js']) expect(packed).toContain(file)
  })

  it('installs, and every subpath export imports', async () => {
    const script = `
      const root = await import('subagent-worker')
      const ai = await import('subagent-worker/ai-sdk')
      const bullmq = await import('subagent-worker/bullmq')
      console.log(JSON.stringify([typeof root.createHost, typeof ai.fromLanguageModel, typeof bullmq.bullmqTransport]))`
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: consumer })
    expect(JSON.parse(stdout)).toEqual(['function', 'function', 'function'])
  })

  it('its bin runs with npx', async () => {
    const { stdout } = await run('npx', ['--no-install', 'subagent-worker', '--help'], { cwd: consumer })
    expect(stdout).toContain('usage: subagent-worker <command>')
  })
})
