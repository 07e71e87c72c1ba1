/**
 * The process sandbox and symbolic links. Grants are resolved to real paths, so a folder granted
 * through a link grants its files by their real names too (imports and process.cwd() use those).
 * Node follows a link inside a granted folder wherever it leads: the host warns when a granted
 * folder's own entries link out of it, and the README says so.
 */
import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createHost, textResponse, toolCallResponse, type HostOptions } from 'subagent-worker'
import { toolResults } from '../support/loop-helpers.js'
import { closeWorkerHosts, workerHost } from '../support/worker-host.js'

const SANDBOX_MODULE = fileURLToPath(new URL('../fixtures/sandbox-module.mjs', import.meta.url))
const WARNING = 'SUBAGENT_WORKER_SANDBOX_LINK_OUT'

afterEach(closeWorkerHosts)

let dir: string
beforeAll(async () => {
  dir = await realpath(await mkdtemp(join(tmpdir(), 'subagent-worker-links-')))
  await mkdir(join(dir, 'real'))
  await writeFile(join(dir, 'real', 'notes.txt'), 'real notes')
  await symlink(join(dir, 'real'), join(dir, 'link'), 'dir')
  await mkdir(join(dir, 'outside'))
  await writeFile(join(dir, 'outside', 'secret.txt'), 'outside secret')
  await mkdir(join(dir, 'leaky'))
  await symlink(join(dir, 'outside'), join(dir, 'leaky', 'way-out'), 'dir')
})
afterAll(() => rm(dir, { recursive: true, force: true }))

async function read(path: string, options: HostOptions): Promise<string> {
  const fixture = workerHost(SANDBOX_MODULE, [toolCallResponse('c1', 'read', { path }), textResponse('done')], { isolation: 'process', ...options })
  const { events } = await fixture.run()
  return toolResults(events)[0]!.content.map((block) => block.text).join('')
}

/** The warnings `create` emits, by code. */
async function warningsWhile(create: () => unknown): Promise<Error[]> {
  const seen: Error[] = []
  const listener = (warning: Error) => void seen.push(warning)
  process.on('warning', listener)
  try {
    create()
    // emitWarning delivers on the next tick.
    await new Promise((resolve) => setImmediate(resolve))
  } finally {
    process.off('warning', listener)
  }
  return seen.filter((warning) => (warning as Error & { code?: string }).code === WARNING)
}

describe('process transport: grants and links', () => {
  it('a folder granted through a link grants its files by their real path too', async () => {
    const sandbox = { fsRead: [join(dir, 'link')] }
    expect(await read(join(dir, 'real', 'notes.txt'), { sandbox })).toBe('real notes')
    expect(await read(join(dir, 'link', 'notes.txt'), { sandbox })).toBe('real notes')
  })

  it('a link inside a granted folder is followed out of it (Node does), and the host warns naming it', async () => {
    const sandbox = { fsRead: [join(dir, 'leaky')] }
    let host: ReturnType<typeof createHost> | undefined
    const warnings = await warningsWhile(() => (host = createHost({ isolation: 'process', sandbox })))
    await host!.close()
    expect(warnings.map((warning) => warning.message)).toEqual([
      `sandbox.fsRead grants ${join(dir, 'leaky')}, and links in it lead outside it (way-out -> ${join(dir, 'outside')}): Node follows them, so a child may reach there too. Remove the links or grant a narrower folder`,
    ])
    expect(await read(join(dir, 'leaky', 'way-out', 'secret.txt'), { sandbox })).toBe('outside secret')
  })

  it('no warning for a folder whose links stay inside it', async () => {
    await symlink(join(dir, 'real', 'notes.txt'), join(dir, 'real', 'alias.txt'))
    let host: ReturnType<typeof createHost> | undefined
    expect(await warningsWhile(() => (host = createHost({ isolation: 'process', sandbox: { fsRead: [join(dir, 'real')] } })))).toEqual([])
    await host!.close()
  })
})
