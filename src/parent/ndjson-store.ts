/**
 * A durable session store: `<dir>/<id>.jsonl`, the header on the first line, then one event a
 * line. Appends are whole lines, so a crash can only tear the last line, which `read` ignores.
 */
import { appendFile, mkdir, open, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { SessionEvent, SessionHeader } from '../protocol/session.js'
import { matches, readHeader, type SessionList, type SessionStore } from './store.js'

const SAFE_ID = /^(?!\.{1,2}$)[A-Za-z0-9._-]{1,200}$/

export function createNdjsonStore(dir: string): SessionStore {
  if (typeof dir !== 'string' || dir === '') throw new TypeError('createNdjsonStore needs a directory path')
  const ready = mkdir(dir, { recursive: true })
  const file = (id: string) => {
    if (!SAFE_ID.test(id)) throw new Error(`session id ${JSON.stringify(id)} cannot name a file: use letters, digits, ".", "_" or "-"`)
    return join(dir, `${id}.jsonl`)
  }
  const lines = (items: readonly unknown[]) => items.map((item) => `${JSON.stringify(item)}\n`).join('')
  /** Files whose tail is known whole: created here, or repaired before this process first appended. */
  const whole = new Set<string>()

  return {
    async create(header) {
      await ready
      await writeFile(file(header.id), lines([header]), { flag: 'wx' }).catch((error: NodeJS.ErrnoException) => {
        throw error.code === 'EEXIST' ? new Error(`session "${header.id}" already exists in ${dir}`) : error
      })
      whole.add(header.id)
    },
    async append(id, events) {
      if (events.length === 0) return
      if (!whole.has(id)) {
        // A resumed transcript may end in a line torn by a crash: cut it off, or appending
        // would turn it into a corrupt line in the middle.
        await cutTornTail(file(id))
        whole.add(id)
      }
      await appendFile(file(id), lines(events))
    },
    async read(id) {
      let text: string
      try {
        text = await readFile(file(id), 'utf8')
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
        throw error
      }
      return parse(text, file(id))
    },
    async list(filter) {
      await ready
      const names = (await readdir(dir)).filter((name) => name.endsWith('.jsonl')).sort()
      const list: SessionList = { sessions: [], unreadable: [] }
      // One corrupt transcript must not hide the healthy ones: it is listed apart, with why.
      const read = await Promise.allSettled(names.map((name) => firstLine(join(dir, name)).then((line) => headerOf(line, join(dir, name)))))
      read.forEach((outcome, i) => {
        const id = names[i]!.slice(0, -'.jsonl'.length)
        if (outcome.status === 'rejected') list.unreadable.push({ id, error: (outcome.reason as Error).message })
        else if (outcome.value && matches(outcome.value, filter)) list.sessions.push(outcome.value)
      })
      return list
    },
    async delete(id) {
      await rm(file(id), { force: true })
      whole.delete(id)
    },
  }
}

async function cutTornTail(path: string): Promise<void> {
  const handle = await open(path, 'r+')
  try {
    const bytes = await handle.readFile()
    const whole = bytes.lastIndexOf(0x0a) + 1
    if (whole < bytes.length) await handle.truncate(whole)
  } finally {
    await handle.close()
  }
}

/** Undefined when not even the header line was completely written. */
function parse(text: string, path: string): { header: SessionHeader; events: SessionEvent[] } | undefined {
  const rows = text.split('\n')
  // A file always ends with a newline; anything after the last one is a torn write.
  rows.pop()
  const [first, ...rest] = rows
  const header = headerOf(first, path)
  if (!header) return undefined
  return { header, events: rest.map((line, i) => parseLine(line, path, i + 2) as SessionEvent) }
}

/** The header from a transcript's first line (undefined for a torn one); throws when it is not a header. */
function headerOf(line: string | undefined, path: string): SessionHeader | undefined {
  if (line === undefined) return undefined
  const header = parseLine(line, path, 1)
  if (typeof header !== 'object' || header === null || typeof (header as { id?: unknown }).id !== 'string') {
    throw new Error(`${path}:1 is not a session header: the transcript is corrupt`)
  }
  return readHeader(header as SessionHeader)
}

/** A file's first whole line, read no further than it (transcripts can be long); undefined when torn. */
async function firstLine(path: string): Promise<string | undefined> {
  const handle = await open(path, 'r')
  try {
    // Bytes, decoded once the newline is found: a character may straddle two reads.
    const read: Buffer[] = []
    for (;;) {
      const buffer = Buffer.alloc(64 * 1024)
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, null)
      if (bytesRead === 0) return undefined
      const chunk = buffer.subarray(0, bytesRead)
      const end = chunk.indexOf(0x0a)
      if (end >= 0) return Buffer.concat([...read, chunk.subarray(0, end)]).toString('utf8')
      read.push(chunk)
    }
  } finally {
    await handle.close()
  }
}

function parseLine(line: string, path: string, number: number): unknown {
  try {
    return JSON.parse(line)
  } catch {
    throw new Error(`${path}:${number} is not valid JSON: the transcript is corrupt`)
  }
}
