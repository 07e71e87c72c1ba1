/**
 * The ndjson store's writer lock under a race: many processes taking over the lock of a writer
 * that died, at once. Exactly one may win each time, and the lock it leaves names it, whole.
 */
import { spawn, spawnSync, type ChildProcessByStdio } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import type { Readable, Writable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createNdjsonStore } from 'subagent-worker'

const RACER = fileURLToPath(new URL('../fixtures/lock-racer.mjs', import.meta.url))
type RacerProcess = ChildProcessByStdio<Writable, Readable, null>

const RACERS = 8
const TRIALS = 12

let dir: string
let racers: RacerProcess[] = []
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'subagent-worker-lock-race-'))
})
afterEach(async () => {
  for (const racer of racers.splice(0)) racer.kill('SIGKILL')
  await rm(dir, { recursive: true, force: true })
})

interface Racer {
  process: RacerProcess
  /** The racer's next line. */
  next: () => Promise<string>
}

function startRacer(): Racer {
  const child = spawn(process.execPath, [RACER, dir], { stdio: ['pipe', 'pipe', 'inherit'] })
  racers.push(child)
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  return {
    process: child,
    next: async () => {
      const { value, done } = await lines.next()
      if (done) throw new Error(`racer ${child.pid} ended early`)
      return value as string
    },
  }
}

describe('ndjson store: the writer lock under a race', () => {
  it(`${RACERS} processes taking over a dead writer's lock at once: one wins, every trial, and the lock is whole and names it`, async () => {
    const dead = spawnSync(process.execPath, ['-e', '0']).pid // a process that has exited
    const field = Array.from({ length: RACERS }, startRacer)
    expect(await Promise.all(field.map((racer) => racer.next()))).toEqual(field.map(() => 'ready'))
    for (let trial = 0; trial < TRIALS; trial++) {
      const id = `race${trial}`
      const lock = join(dir, `${id}.jsonl.lock`)
      await writeFile(lock, JSON.stringify({ pid: dead, store: 'crashed' }))
      // The barrier: every racer is idle, waiting for the id, before any is given it.
      for (const racer of field) racer.process.stdin.write(`${id}\n`)
      const said = await Promise.all(field.map((racer) => racer.next()))
      const winners = field.filter((_, i) => said[i] === 'won')
      expect({ trial, winners: winners.length }).toEqual({ trial, winners: 1 })
      for (const line of said.filter((line) => line !== 'won')) expect(line).toMatch(/^refused: session "race\d+" is being (written|taken over) by process \d+/)
      const holder = JSON.parse(await readFile(lock, 'utf8')) as { pid: number }
      expect(holder.pid).toBe(winners[0]!.process.pid)
    }
    // Nothing left over beside the locks: no claim's temporary file, no take-over marker.
    expect((await readdir(dir)).sort()).toEqual(Array.from({ length: TRIALS }, (_, trial) => `race${trial}.jsonl.lock`).sort())
  })

  it('a take-over left half done by a taker that died is taken over in turn; one by a live taker refuses, naming it', async () => {
    const dead = spawnSync(process.execPath, ['-e', '0']).pid
    const lock = join(dir, 's1.jsonl.lock')
    const stale = JSON.stringify({ pid: dead, store: 'crashed' })
    const marker = `${lock}.takeover-${createHash('sha256').update(stale).digest('hex').slice(0, 16)}`
    await writeFile(lock, stale)
    await writeFile(marker, JSON.stringify({ pid: process.pid, store: 'a live taker' }))
    await expect(createNdjsonStore(dir).append('s1', [])).rejects.toThrow(
      /session "s1" is being taken over by another store in this process \(its last writer is gone\): a transcript has one writer at a time/,
    )
    await writeFile(marker, JSON.stringify({ pid: dead, store: 'a taker that died' }))
    await createNdjsonStore(dir).append('s1', [])
    expect(JSON.parse(await readFile(lock, 'utf8'))).toMatchObject({ pid: process.pid })
    expect(await readdir(dir)).toEqual(['s1.jsonl.lock'])
  })
})
