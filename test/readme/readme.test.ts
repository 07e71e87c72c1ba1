/**
 * Every TypeScript block of README.md, as a reader copies it: extracted, compiled with strict
 * TypeScript against the built package in a project of its own, and run with Node where it runs.
 *
 * Each block is preceded by a marker saying how it is tested:
 *   <!-- readme-test: run [after=CONTEXT] -->      compiled and run; it must exit 0
 *   <!-- readme-test: compile [after=CONTEXT] -->  compiled only (the marker's text says why)
 *   <!-- readme-test: file=NAME -->                written as NAME for the other blocks (the agent module)
 * A fragment that continues the README's story names the CONTEXT it continues (below): the
 * variables the text before it has made. A block that makes a host and does not close it gets
 * one probing delegation (its agent module and runners must start) and is closed after it, so its
 * process can exit. Library names a block uses without importing are
 * imported for it, as the README's first block shows. A ts block without a marker fails the test.
 */
import { execFile } from 'node:child_process'
import { cp, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const run = promisify(execFile)
const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const README = join(ROOT, 'README.md')
const LINKED = ['ai', 'bullmq', 'ioredis', '@types/node', '@ai-sdk/provider', '@opentelemetry', '@modelcontextprotocol']
// Copied, not linked: the agent module imports it from the project's own node_modules, as a
// user's does, so the process sandbox block must grant that folder.
const COPIED = ['zod']

/** What the README has made before a fragment that continues it. */
const CONTEXTS: Record<string, string> = {
  // "Models and tools: where code runs": a host with the agent module.
  host: `const host = createHost({ agentModule: new URL('./agents.js', import.meta.url) })\n`,
  // "Usage": a host with the scripted model and a parent.
  parent: `const host = createHost({ isolation: 'worker' })
host.models.register('scripted', new ScriptedModel(Array.from({ length: 4 }, () => textResponse('The answer is 42.'))))
const parent = host.createAgent({ options: { provider: 'scripted', model: 'any' } })\n`,
  // "Transcripts": a host writing to a store, whose parent has delegated once.
  transcripts: `import { resolve as resolvePath } from 'node:path'
const store = createNdjsonStore(resolvePath('sessions'))
const host = createHost({ store })
host.models.register('scripted', new ScriptedModel(Array.from({ length: 4 }, () => textResponse('The answer is 42.'))))
const parent = host.createAgent({ options: { provider: 'scripted', model: 'any' } })
await host.spawn.run({ prompt: 'What is the answer?', parent })\n`,
}

// After a block that makes a host of its own: one delegation that must complete, so its runner
// must start and load the host's agent module (a wrong module path or sandbox grant shows here).
const PROBE = `
host.models.register('readme-probe', new ScriptedModel([textResponse('probed')]))
const probed = await host.spawn.run({ prompt: 'probe', parent: host.createAgent({ options: { provider: 'readme-probe', model: 'probe' } }) })
if (probed.stopReason !== 'completed') throw new Error(\`the probing delegation ended \${probed.stopReason}: \${probed.diagnostic}\`)
`

// The AI SDK block names a provider package this repository does not install; its one export, typed as the AI SDK types it.
const ANTHROPIC_STUB = `import type { LanguageModelV3 } from '@ai-sdk/provider'
export declare function anthropic(modelId: string): LanguageModelV3\n`

interface Block {
  index: number
  line: number
  code: string
  mode: 'run' | 'compile' | 'file'
  after?: string
  file?: string
}

/** The README's ts/js blocks with their markers; a block with none is returned with mode undefined. */
function readmeBlocks(text: string): Array<Omit<Block, 'mode'> & { mode: Block['mode'] | undefined }> {
  const blocks: Array<Omit<Block, 'mode'> & { mode: Block['mode'] | undefined }> = []
  const fence = /^```(\w*)\n([\s\S]*?)^```$/gm
  let index = 0
  for (const match of text.matchAll(fence)) {
    index++
    const language = match[1]
    if (language !== 'ts' && language !== 'js') continue
    const before = text.slice(0, match.index).trimEnd()
    const marker = /<!-- readme-test: (run|compile|file=(\S+))(?: after=(\w+))?[^>]*-->$/.exec(before.slice(before.lastIndexOf('\n') + 1))
    const mode = marker ? (marker[2] ? 'file' : (marker[1] as 'run' | 'compile')) : undefined
    blocks.push({
      index,
      line: text.slice(0, match.index).split('\n').length,
      code: match[2]!,
      mode,
      ...(marker?.[3] ? { after: marker[3] } : {}),
      ...(marker?.[2] ? { file: marker[2] } : {}),
    })
  }
  return blocks
}

/** The import line for the library's names `code` uses without importing them. */
function implicitImports(code: string, exported: readonly string[]): string {
  const imported = new Set([...code.matchAll(/import\s*(?:type\s*)?\{([^}]*)\}/g)].flatMap((m) => m[1]!.split(',').map((name) => name.trim().split(/\s+as\s+/).pop()!)))
  const used = exported.filter((name) => !imported.has(name) && new RegExp(`\\b${name}\\b`).test(code))
  return used.length === 0 ? '' : `import { ${used.join(', ')} } from 'subagent-worker'\n`
}

/** The program a block becomes: its context, the block, and a close for a host it leaves open. */
function programOf(block: Block, exported: readonly string[]): string {
  const context = block.after === undefined ? '' : CONTEXTS[block.after]
  if (context === undefined) throw new Error(`README block ${block.index} (line ${block.line}) names an unknown context "${block.after}"`)
  const opened = `${context}${block.code}`
  const close = /\bconst host = /.test(opened) && !/\bhost\.close\(\)/.test(opened) ? `${/\bconst host = /.test(block.code) ? PROBE : ''}\nawait host.close()\n` : ''
  const body = `${opened}${close}`
  // Imports first: a context's own import lines are moved up with them.
  const lines = body.split('\n')
  const imports = lines.filter((line) => /^import /.test(line))
  const rest = lines.filter((line) => !/^import /.test(line))
  return `${implicitImports(body, exported)}${imports.join('\n')}\n${rest.join('\n')}\nexport {}\n`
}

let project: string
let blocks: Block[]
let unmarked: number[]
let compiled: { stdout: string }

beforeAll(async () => {
  const found = readmeBlocks(await readFile(README, 'utf8'))
  unmarked = found.filter((block) => block.mode === undefined).map((block) => block.line)
  blocks = found.filter((block): block is Block => block.mode !== undefined)
  const exported = Object.keys(await import('subagent-worker'))

  project = await mkdtemp(join(tmpdir(), 'subagent-worker-readme-'))
  await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'readme', private: true, type: 'module' }))
  await writeFile(
    join(project, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'nodenext',
        moduleResolution: 'nodenext',
        lib: ['ES2022', 'ESNext.Disposable'],
        types: ['node'],
        strict: true,
        noUncheckedIndexedAccess: true,
        skipLibCheck: true,
        rootDir: 'src',
        outDir: 'dist',
      },
      include: ['src'],
    }),
  )
  await mkdir(join(project, 'src'))
  await mkdir(join(project, 'node_modules', '@ai-sdk', 'anthropic'), { recursive: true })
  await symlink(ROOT, join(project, 'node_modules', 'subagent-worker'), 'dir')
  for (const name of LINKED) {
    await mkdir(dirname(join(project, 'node_modules', name)), { recursive: true })
    await symlink(join(ROOT, 'node_modules', name), join(project, 'node_modules', name), 'dir')
  }
  for (const name of COPIED) await cp(join(ROOT, 'node_modules', name), join(project, 'node_modules', name), { recursive: true })
  const anthropic = join(project, 'node_modules', '@ai-sdk', 'anthropic')
  await writeFile(join(anthropic, 'package.json'), JSON.stringify({ name: '@ai-sdk/anthropic', type: 'module', types: './index.d.ts' }))
  await writeFile(join(anthropic, 'index.d.ts'), ANTHROPIC_STUB)

  for (const block of blocks) {
    const name = block.mode === 'file' ? block.file! : `block-${String(block.index).padStart(2, '0')}.ts`
    await writeFile(join(project, 'src', name), block.mode === 'file' ? block.code : programOf(block, exported))
  }
  const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc')
  compiled = await run(process.execPath, [tsc, '-p', project]).catch((error: { stdout: string }) => error)
}, 60_000)

afterAll(() => (process.env.README_TEST_KEEP ? undefined : rm(project, { recursive: true, force: true })))

describe('README.md', () => {
  it('marks every ts block with how it is tested', () => {
    expect(unmarked, 'README lines of ts blocks without a <!-- readme-test: ... --> marker').toEqual([])
    expect(blocks.length).toBeGreaterThan(8)
  })

  it('every ts block compiles with strict TypeScript against the package', () => {
    expect(compiled.stdout).toBe('')
  })

  it('every block marked run runs as written', async () => {
    const runnable = blocks.filter((block) => block.mode === 'run')
    expect(runnable.length).toBeGreaterThan(5)
    const failures: string[] = []
    for (const block of runnable) {
      const script = join(project, 'dist', `block-${String(block.index).padStart(2, '0')}.js`)
      await run(process.execPath, [script], { cwd: project, timeout: 30_000 }).catch((error: { stderr: string; signal?: string }) => {
        failures.push(`README block ${block.index} (line ${block.line}): ${error.signal ?? ''}${error.stderr}`)
      })
    }
    expect(failures).toEqual([])
  }, 240_000)
})
