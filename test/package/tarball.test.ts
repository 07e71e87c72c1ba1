/**
 * The package as a user gets it: `npm pack`, unpacked into a fresh project's node_modules, then
 * a strict TypeScript program (test/package/consumer) compiled against its declarations and run
 * on every transport (a sandboxed child process loads the package from where it is installed). This is where a missing file in `files`, an export map entry that points
 * nowhere or a public type that does not infer shows up.
 */
import { execFile } from 'node:child_process'
import { cp, mkdir, mkdtemp, readdir, readFile, rm, symlink } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const run = promisify(execFile)
const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const CONSUMER = fileURLToPath(new URL('./consumer', import.meta.url))
// What the consumer imports besides the package: its dependencies and the consumer's own.
const LINKED = ['ajv', 'json-schema-to-ts', 'openai', 'zod', 'ai', '@modelcontextprotocol/sdk', '@types/node']

let project: string
let unpacked: string

beforeAll(async () => {
  project = await mkdtemp(join(tmpdir(), 'subagent-worker-consumer-'))
  const { stdout } = await run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', project], { cwd: ROOT })
  const [{ filename }] = JSON.parse(stdout) as [{ filename: string }]
  unpacked = join(project, 'node_modules', 'subagent-worker')
  await mkdir(unpacked, { recursive: true })
  await run('tar', ['-xzf', join(project, filename), '-C', unpacked, '--strip-components=1'])
  for (const name of LINKED) {
    await mkdir(dirname(join(project, 'node_modules', name)), { recursive: true })
    await symlink(join(ROOT, 'node_modules', name), join(project, 'node_modules', name), 'dir')
  }
  await cp(CONSUMER, project, { recursive: true })
}, 60_000)

afterAll(() => rm(project, { recursive: true, force: true }))

describe('the packed tarball', () => {
  it('ships the licence, the docs the README links and the build, but no tests', async () => {
    const files = await readdir(unpacked, { recursive: true })
    for (const file of ['LICENSE', 'README.md', 'BENCHMARKS.md', 'docs/contract.md', 'docs/design.md', 'dist/index.d.ts', 'dist/ai-sdk/index.js', 'dist/mcp/index.js', 'dist/cli/main.js', 'dist/protocol/ajv.cjs', 'dist/runner/entry.js', 'dist/runner/process-entry.js', 'dist/runner/index.js']) {
      expect(files).toContain(file)
    }
    expect(files.some((file) => file.startsWith('test'))).toBe(false)
    const readme = await readFile(join(unpacked, 'README.md'), 'utf8')
    const links = [...readme.matchAll(/\]\((?!https?:|#)([^)]+)\)/g)].map((match) => match[1]!)
    expect(links.length).toBeGreaterThan(0)
    for (const link of links) expect(files, `README links ${link}`).toContain(link)
  })

  it('a strict TypeScript project compiles against it: arguments and structured results infer, misuse does not compile', async () => {
    const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc')
    for (const config of ['tsconfig.json', 'tsconfig.ai.json', 'tsconfig.mcp.json']) {
      const compiled = await run(process.execPath, [tsc, '-p', join(project, config)]).catch((error: { stdout: string }) => error)
      expect(compiled.stdout, config).toBe('')
    }
  }, 60_000)

  it('the MCP snippet it compiles is the README\'s', async () => {
    const readme = await readFile(join(unpacked, 'README.md'), 'utf8')
    const snippet = (await readFile(join(CONSUMER, 'mcp.ts'), 'utf8')).split('\n').slice(1).join('\n')
    expect(readme).toContain(`\`\`\`ts\n${snippet}\`\`\``)
  })

  it('the compiled program runs the README delegation in one call on every transport', async () => {
    const { stdout } = await run(process.execPath, [join(project, 'out', 'main.js')], { cwd: project, timeout: 30_000 })
    const report = JSON.parse(stdout) as Record<string, unknown>
    for (const isolation of ['inline', 'worker', 'process']) {
      expect(report[isolation]).toEqual({
        answer: 'The answer is 42.',
        stopReason: 'completed',
        label: 'bug',
        words: 3,
        turn: 'Hello.',
        ends: [
          { stopReason: 'completed', label: null, usage: { inputTokens: 0, outputTokens: 5 } },
          { stopReason: 'completed', label: 'classify', usage: { inputTokens: 0, outputTokens: 11 } },
        ],
        args: ['description', 'prompt'],
      })
    }
  }, 40_000)

  it('its AI SDK entry resolves and returns the structured value a zod schema describes', async () => {
    const { stdout } = await run(process.execPath, [join(project, 'out', 'ai.js')], { cwd: project, timeout: 30_000 })
    expect(JSON.parse(stdout)).toEqual({ label: 'feature' })
  }, 40_000)
})
