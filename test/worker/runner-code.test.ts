/**
 * What a runner runs: the build's bundle of the package (dist/runner/), under a condition that
 * makes every import of the package inside the runner resolve to it, an agent module's as much as
 * the runner's own, so the runner holds one copy of each class. A host started with Node options
 * of its own passes them on to its runner threads, but for those a thread refuses.
 */
import { execFile } from 'node:child_process'
import { cp, mkdtemp, rm, symlink, utimes } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterEach, describe, expect, it } from 'vitest'
import { createHost, ScriptedModel, textResponse, toolCallResponse, type ScriptEntry } from 'subagent-worker'
import { BULLMQ, ownRunnerOptions, POOLED, TRANSPORTS, type TransportName } from '../support/harness.js'
import { toolResults } from '../support/loop-helpers.js'
import { closeWorkerHosts, workerHost } from '../support/worker-host.js'

const MODULE = fileURLToPath(new URL('../fixtures/runner-code-module.mjs', import.meta.url))
const NESTED_MODULE = fileURLToPath(new URL('../fixtures/nested-host-module.mjs', import.meta.url))
const PATH_IMPORT_MODULE = fileURLToPath(new URL('../fixtures/path-import-module.mjs', import.meta.url))
const HOST_SCRIPT = fileURLToPath(new URL('../fixtures/runner-options.mjs', import.meta.url))
const BUNDLE_ENTRY = new URL('../../dist/runner/index.js', import.meta.url).href
const CONDITION = '--conditions=subagent-worker-runner'

afterEach(closeWorkerHosts)

interface RunnerCode {
  entry: string
  execArgv: string[]
}

/** Every transport whose children run on a runner: a node of the test's own on bullmq. */
const RUNNERS: readonly TransportName[] = BULLMQ ? [...POOLED, 'bullmq'] : POOLED

/** One delegation on `transport` with `module`; the tool results the host recorded. */
async function delegateOnce(transport: TransportName, module: string, script: ScriptEntry[], onTestFinished: (fn: () => Promise<void>) => void) {
  const host = createHost({ ...(await ownRunnerOptions(transport, [module], onTestFinished)), agentModule: module })
  try {
    host.models.register('scripted', new ScriptedModel(script))
    const parent = host.createAgent({ options: { provider: 'scripted' } })
    const run = await host.spawn.start({ prompt: 'go', parent, signal: new AbortController().signal })
    const result = await run.result
    const events = host.agents.get(run.id)!.session.events
    await run.dispose()
    return { result, results: toolResults(events) }
  } finally {
    await host.close()
  }
}

describe.each(RUNNERS)('%s transport: the code a runner runs', (transport) => {
  it("an agent module's import of the package resolves to the runner's bundle", async ({ onTestFinished }) => {
    const { result, results } = await delegateOnce(transport, MODULE, [toolCallResponse('c1', 'runner_code', {}), textResponse('done')], onTestFinished)
    expect(result.stopReason).toBe('completed')
    const said = JSON.parse(results[0]!.content[0]!.text!) as RunnerCode
    expect(said.entry).toBe(BUNDLE_ENTRY)
    expect(said.execArgv).toContain(CONDITION)
  })
})

describe.each(TRANSPORTS)('%s transport: a module with a copy of the package of its own', (transport) => {
  it('throws a ToolError the runner knows: its code and its exact text reach the model', async ({ onTestFinished }) => {
    const { result, results } = await delegateOnce(transport, PATH_IMPORT_MODULE, [toolCallResponse('c1', 'refuse', {}), textResponse('done')], onTestFinished)
    expect(result.stopReason).toBe('completed')
    expect(results[0]).toMatchObject({ isError: true, code: 'DENIED', content: [{ type: 'text', text: 'refused by policy' }] })
  })
})

describe('a host made inside a runner', () => {
  it.each(POOLED)('starts %s runners of its own: the runner code and the sandbox are found from the bundle too', async (inner) => {
    const fixture = workerHost(NESTED_MODULE, [toolCallResponse('c1', 'nested_host', { isolation: inner }), textResponse('done')])
    const { result, events } = await fixture.run()
    expect(result.stopReason).toBe('completed')
    expect(toolResults(events)[0]!.content[0]!.text).toBe('completed: nested answer')
  })
})

describe("a host's own Node options", () => {
  it('reach its runner threads, but for those a thread refuses; the runners start all the same', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--max-old-space-size=512', '--conditions=a-condition-of-the-hosts', '--title', 'a-host', HOST_SCRIPT], { timeout: 50_000 })
    const { stopReason, said } = JSON.parse(stdout) as { stopReason: string; said: string }
    expect(stopReason).toBe('completed')
    const { entry, execArgv } = JSON.parse(said) as RunnerCode
    expect(entry).toBe(BUNDLE_ENTRY)
    // A V8 option and a process-wide one are the process's, and hold for the thread without being passed on.
    expect(execArgv).toEqual(['--conditions=a-condition-of-the-hosts', CONDITION])
  })

  it('reach them from NODE_OPTIONS too, quoted as Node reads it, but for those a thread refuses', async () => {
    const NODE_OPTIONS = '--max-old-space-size=512 --conditions="from node options" --enable-source-maps --title "a host"'
    const { stdout } = await promisify(execFile)(process.execPath, ['--conditions=from-the-command-line', HOST_SCRIPT], { timeout: 50_000, env: { ...process.env, NODE_OPTIONS } })
    const { stopReason, said } = JSON.parse(stdout) as { stopReason: string; said: string }
    expect(stopReason).toBe('completed')
    expect((JSON.parse(said) as RunnerCode).execArgv).toEqual(['--conditions=from node options', '--enable-source-maps', '--conditions=from-the-command-line', CONDITION])
  })

  it('named otherwise in Node\'s refusal (an alias) are left out, with a warning; the runners start all the same', async () => {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ['--experimental-shadow-realm', HOST_SCRIPT], { timeout: 50_000 })
    const { stopReason, said } = JSON.parse(stdout) as { stopReason: string; said: string }
    expect(stopReason).toBe('completed')
    expect((JSON.parse(said) as RunnerCode).execArgv).toEqual([CONDITION])
    expect(stderr).toContain('[SUBAGENT_THREAD_OPTIONS]')
    expect(stderr).toContain('--experimental-shadow-realm')
  })
})

/** A copy of the package's build, less the files `omit` names; removed when the test ends. */
async function copyOfBuild(omit: (path: string) => boolean, onTestFinished: (fn: () => Promise<void>) => void): Promise<string> {
  const root = fileURLToPath(new URL('../..', import.meta.url))
  const copy = await mkdtemp(join(tmpdir(), 'subagent-worker-build-'))
  onTestFinished(() => rm(copy, { recursive: true, force: true }))
  await cp(join(root, 'package.json'), join(copy, 'package.json'))
  await cp(join(root, 'dist'), join(copy, 'dist'), { recursive: true, filter: (path) => !omit(relative(root, path)) })
  await symlink(join(root, 'node_modules'), join(copy, 'node_modules'), 'dir')
  return copy
}

/** What `createHost({ isolation })` from `copy` printed, and its warnings. */
async function createHostIn(copy: string, isolation: string) {
  const script = `import('${new URL('dist/index.js', `file://${copy}/`).href}').then(({ createHost }) => {
    try { const host = createHost({ isolation: '${isolation}' }); console.log('{"created":true}'); return host.close() } catch (error) { console.log(JSON.stringify({ code: error.code, message: error.message })) }
  })`
  const { stdout, stderr } = await promisify(execFile)(process.execPath, ['-e', script], { timeout: 30_000 })
  return { said: JSON.parse(stdout) as { created?: true; code?: string; message?: string }, stderr }
}

describe('a build without the runner bundle (tsc alone)', () => {
  it.for(POOLED)('a %s host says what is missing and how to build it, at createHost', async (isolation, { onTestFinished }) => {
    const copy = await copyOfBuild((path) => path.startsWith(join('dist', 'runner')), onTestFinished)
    const { said } = await createHostIn(copy, isolation)
    expect(said.code).toBe('ERR_SUBAGENT_ENTRY')
    expect(said.message).toContain(join(copy, 'dist', 'runner'))
    expect(said.message).toContain('npm run build')
  })
})

describe('a bundle older than the files tsc wrote after it (tsc alone, after a build)', () => {
  it.for(POOLED)('a %s host warns once that its runners would run the older code, and how to build it', async (isolation, { onTestFinished }) => {
    const copy = await copyOfBuild(() => false, onTestFinished)
    const entry = join(copy, 'dist', 'worker', isolation === 'worker' ? 'entry.js' : 'process-entry.js')
    const later = new Date(Date.now() + 10 * 60_000)
    await utimes(entry, later, later)
    const { said, stderr } = await createHostIn(copy, isolation)
    expect(said.created).toBe(true)
    expect(stderr.match(/\[SUBAGENT_STALE_RUNNER_CODE\]/g)).toHaveLength(1)
    expect(stderr).toContain(join(copy, 'dist', 'runner'))
    expect(stderr).toContain('npm run build')
  })

  it.for(POOLED)('a %s host of a fresh build, or of a copy made file by file, says nothing', async (isolation, { onTestFinished }) => {
    const copy = await copyOfBuild(() => false, onTestFinished)
    const { said, stderr } = await createHostIn(copy, isolation)
    expect(said.created).toBe(true)
    expect(stderr).not.toContain('SUBAGENT_STALE_RUNNER_CODE')
  })
})
