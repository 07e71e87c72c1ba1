/**
 * CONTRACT.md §8 and §9: what a child may touch. On every pooled transport its environment is
 * `pool.env` and never a copy of the host's. In a child process it also runs under Node's
 * permission model, deny by default: each denied operation reaches the model as an ordinary tool
 * error naming the permission, and each grant in `sandbox` works. When the host dies, its child
 * processes exit.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, realpathSync } from 'node:fs'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createHost, InvalidOptionError, textResponse, toolCallResponse, type HostOptions } from 'subagent-worker'
import { permissionFlags } from '../../dist/parent/runners/endpoints/sandbox.js'
import { POOLED } from '../support/harness.js'
import { toolResults } from '../support/loop-helpers.js'
import { closeWorkerHosts, workerHost } from '../support/worker-host.js'

const SANDBOX_MODULE = fileURLToPath(new URL('../fixtures/sandbox-module.mjs', import.meta.url))
const SECRET_NAME = 'SUBAGENT_WORKER_TEST_SECRET'

afterEach(closeWorkerHosts)

let dir: string
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'subagent-worker-sandbox-'))
  await writeFile(join(dir, 'secret.txt'), 'the host secret')
  process.env[SECRET_NAME] = 'sk-host-only-value'
})
afterAll(async () => {
  delete process.env[SECRET_NAME]
  await rm(dir, { recursive: true, force: true })
})

/** Runs one child that calls `tool` with `args`, then answers; returns that call's tool result and what the model was sent. */
async function attempt(isolation: (typeof POOLED)[number], tool: string, args: object, options: HostOptions = {}) {
  const fixture = workerHost(SANDBOX_MODULE, [toolCallResponse('c1', tool, args), textResponse('done')], { isolation, ...options })
  const { events, result } = await fixture.run()
  expect(result.stopReason).toBe('completed')
  const [toolResult] = toolResults(events)
  // What the model's next request carried back as the tool's answer.
  const answer = (fixture.model.requests[1]?.messages as Array<{ role: string; content: Array<{ text?: string }> }>).find((message) => message.role === 'tool')
  const sent = answer?.content.map((block) => block.text).join('')
  return { ...toolResult!, text: toolResult!.content.map((block) => block.text).join(''), sent }
}

describe.each(POOLED)('%s transport: the environment is pool.env, never the host’s', (isolation) => {
  it('a child sees none of the host’s variables by default', async () => {
    expect((await attempt(isolation, 'env', { name: SECRET_NAME })).text).toBe('(unset)')
    expect((await attempt(isolation, 'env', { name: 'PATH' })).text).toBe('(unset)')
  })

  it('pool.env names variables to copy from the host, or gives exact values', async () => {
    expect((await attempt(isolation, 'env', { name: SECRET_NAME }, { pool: { env: [SECRET_NAME] } })).text).toBe('sk-host-only-value')
    expect((await attempt(isolation, 'env', { name: 'MODE' }, { pool: { env: { MODE: 'test' } } })).text).toBe('test')
  })

  it('pool.env is checked when the host is created', () => {
    expect(() => createHost({ isolation, pool: { env: { MODE: 42 as unknown as string } } })).toThrow(InvalidOptionError)
    expect(() => createHost({ isolation, pool: { env: 'PATH' as unknown as string[] } })).toThrow(/pool.env must be an object of exact values/)
  })
})

describe('process transport: deny by default', () => {
  it.each([
    ['write a file outside the allow-list', 'write', () => ({ path: join(dir, 'out.txt') }), /^tool "write" failed: ERR_ACCESS_DENIED: the sandbox does not grant FileSystemWrite on .*out\.txt \(sandbox\.fsWrite\)$/],
    ['read a secret file', 'read', () => ({ path: join(dir, 'secret.txt') }), /^tool "read" failed: ERR_ACCESS_DENIED: the sandbox does not grant FileSystemRead on .*secret\.txt \(sandbox\.fsRead\)$/],
    ['start a process', 'spawn', () => ({}), /^tool "spawn" failed: ERR_ACCESS_DENIED: the sandbox does not grant ChildProcess.* \(sandbox\.childProcess\)$/],
    ['start a worker thread', 'thread', () => ({}), /^tool "thread" failed: ERR_ACCESS_DENIED: the sandbox does not grant WorkerThreads \(sandbox\.worker\)$/],
    ['load a native addon', 'addon', () => ({}), /^tool "addon" failed: ERR_DLOPEN_DISABLED: the sandbox does not grant loading native addons \(sandbox\.addons\)$/],
    ['make a symbolic link (Node names no permission for it)', 'link', () => ({ path: join(dir, 'link') }), /^tool "link" failed: ERR_ACCESS_DENIED: the sandbox does not grant this operation \(.*symlink.*\) \(sandbox\.fsRead and sandbox\.fsWrite\)$/],
  ])('a child may not %s: the model gets a tool error naming the permission', async (_, tool, args, message) => {
    const result = await attempt('process', tool, args())
    expect(result).toMatchObject({ isError: true, code: 'FAILED' })
    expect(result.text).toMatch(message)
    expect(result.sent).toBe(result.text) // the model's next request carries it
  })

  it('nothing was written, and the secret never left the host', async () => {
    await attempt('process', 'write', { path: join(dir, 'out.txt') })
    await expect(readFile(join(dir, 'out.txt'))).rejects.toThrow(/ENOENT/)
    expect((await attempt('process', 'read', { path: join(dir, 'secret.txt') })).sent).not.toContain('the host secret')
  })
})

describe('process transport: what sandbox grants works', () => {
  it('fsRead and fsWrite grant paths (a folder grants everything below it)', async () => {
    const sandbox = { fsRead: [join(dir, 'secret.txt')], fsWrite: [dir] }
    expect((await attempt('process', 'read', { path: join(dir, 'secret.txt') }, { sandbox })).text).toBe('the host secret')
    expect((await attempt('process', 'write', { path: join(dir, 'granted.txt') }, { sandbox })).text).toBe('wrote it')
    expect(await readFile(join(dir, 'granted.txt'), 'utf8')).toBe('written')
  })

  it('childProcess, worker and addons grant what they name', async () => {
    // The spawned node reads its own files: grant it the node binary's folder.
    const sandbox = { childProcess: true, worker: true, addons: true, fsRead: [join(process.execPath, '..', '..')] }
    expect((await attempt('process', 'spawn', {}, { sandbox })).text).toBe('42')
    expect((await attempt('process', 'thread', {}, { sandbox })).text).toBe('thread said 42')
    // Allowed to load, the addon fails only on its missing file.
    expect((await attempt('process', 'addon', {}, { sandbox })).text).not.toContain('ERR_DLOPEN_DISABLED')
  })

  it('sandbox is refused for other transports, and checked', () => {
    expect(() => createHost({ isolation: 'worker', sandbox: {} })).toThrow(/sandbox must be given only with isolation: 'process'/)
    expect(() => createHost({ isolation: 'process', sandbox: { fsRead: ['relative/path'] } })).toThrow(/sandbox.fsRead must be a list of absolute paths/)
    expect(() => createHost({ isolation: 'process', sandbox: { network: true } as never })).toThrow(/sandbox.network must be a known sandbox option/)
  })
})

describe('process transport: the agent module', () => {
  it('is readable, but what it imports from elsewhere must be granted: the start says what and how', async () => {
    await writeFile(join(dir, 'helper.mjs'), 'export const answer = 42\n')
    await writeFile(join(dir, 'agents.mjs'), "import { answer } from './helper.mjs'\nexport default { tools: [] }\nvoid answer\n")
    const denied = workerHost(join(dir, 'agents.mjs'), [textResponse('never')], { isolation: 'process' })
    await expect(denied.run()).rejects.toThrow(
      /agent module file:.*agents\.mjs failed to load: .*the sandbox does not grant FileSystemRead on .*helper\.mjs \(grant it with the host's sandbox\.fsRead\)/,
    )
    const granted = workerHost(join(dir, 'agents.mjs'), [textResponse('loaded')], { isolation: 'process', sandbox: { fsRead: [join(dir, 'helper.mjs')] } })
    expect((await granted.run()).result.output).toEqual([{ type: 'text', text: 'loaded' }])
  })
})

describe('process transport: a host itself under the permission model', () => {
  it('starts its runners and their reaper where it may not read /bin, given the package and child processes', async () => {
    const root = resolve(fileURLToPath(new URL('../..', import.meta.url)))
    const script = fileURLToPath(new URL('../fixtures/permission-host.mjs', import.meta.url))
    const modules = realpathSync(join(root, 'node_modules'))
    // One grant when the dependencies are inside the checkout: with a grant nested in another, Node 20 did not resolve the package by its own name.
    const grants = (modules.startsWith(`${root}/`) ? [root] : [root, modules]).map((path) => `--allow-fs-read=${path}`)
    const { stdout } = await promisify(execFile)(process.execPath, [...permissionFlags(), ...grants, '--allow-child-process', script], { timeout: 50_000 })
    expect(JSON.parse(stdout)).toEqual({ stopReason: 'completed', diagnostic: null })
  })
})

describe('process transport: a host that dies', () => {
  it('leaves no child process behind: the runners exit when their channel to it closes', async () => {
    const script = fileURLToPath(new URL('../fixtures/host-dies.mjs', import.meta.url))
    const host = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'pipe'] })
    const pipesClosed = closedByAll(host)
    const pid = await new Promise<number>((resolve, reject) => {
      host.stdout.once('data', (chunk: Buffer) => resolve(Number(chunk.toString().trim())))
      host.once('exit', (code) => reject(new Error(`the host exited early (${code})`)))
    })
    expect(alive(pid)).toBe(true)
    host.kill('SIGKILL')
    await pipesClosed
    expect(await gone([pid])).toEqual([])
  })

  it('leaves none behind even while a child spins in a synchronous loop: every process it started is gone within 2 s', async () => {
    const script = fileURLToPath(new URL('../fixtures/host-dies-spinning.mjs', import.meta.url))
    const host = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'pipe'] })
    const pipesClosed = closedByAll(host)
    const spinning = await new Promise<number>((resolve, reject) => {
      let said = ''
      host.stdout.on('data', (chunk: Buffer) => {
        said += chunk.toString()
        const match = /spinning (\d+)\n/.exec(said)
        if (match) resolve(Number(match[1]))
      })
      host.once('exit', (code) => reject(new Error(`the host exited early (${code})`)))
    })
    // Its runner, and whatever else it started (on Linux, where /proc lists them).
    const started = new Set([spinning, ...childrenOf(host.pid!)])
    host.kill('SIGKILL')
    const killed = performance.now()
    // Closed once the host and each process holding them (the runner its stdout, the reaper its stderr) are gone; the test's timeout bounds it.
    await pipesClosed
    const survivors = await gone([...started])
    const goneMs = performance.now() - killed
    for (const pid of survivors) process.kill(pid, 'SIGKILL') // never leave a spinning process behind
    console.log(`a SIGKILLed host's last process (of ${started.size}) was gone ${Math.round(goneMs)} ms after the kill`)
    expect(survivors).toEqual([])
    expect(goneMs).toBeLessThan(2000)
  })
})

/** Running: a zombie (killed, not yet reaped by its new parent) no longer runs. */
/**
 * Resolves when the dead host's stdout and stderr pipes are closed by every process holding them:
 * its runners inherit its stdout, its reaper its stderr, so this is the moment they all exited.
 */
function closedByAll(host: ChildProcess): Promise<void> {
  host.stderr!.pipe(process.stderr, { end: false })
  const closed = (stream: NodeJS.ReadableStream) => new Promise<void>((resolve) => stream.once('close', () => resolve()))
  return Promise.all([closed(host.stdout!), closed(host.stderr!)]).then(() => {})
}

/**
 * The processes among `pids` still alive once they are done exiting. They closed their files, so
 * they are in exit: what is left is at most the kernel turning them into zombies, which has no
 * event; each is looked at once a turn, a bounded number of turns.
 */
async function gone(pids: number[], turns = 1000): Promise<number[]> {
  for (let turn = 0; turn < turns && pids.some(alive); turn++) await new Promise((resolve) => setImmediate(resolve))
  return pids.filter(alive)
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  const stat = procStat(pid)
  return stat === undefined || stat.state !== 'Z'
}

/** The processes whose parent is `pid`, from /proc; none where there is no /proc. */
function childrenOf(pid: number): number[] {
  if (!existsSync('/proc/self/stat')) return []
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((candidate) => procStat(candidate)?.ppid === pid)
}

/** A process's state and parent from /proc/<pid>/stat (after its name, which may hold spaces). */
function procStat(pid: number): { state: string; ppid: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const [state = '', ppid = ''] = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return { state, ppid: Number(ppid) }
  } catch {
    return undefined
  }
}

