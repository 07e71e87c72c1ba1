/**
 * A durable session store: `<dir>/<id>.jsonl`, the header on the first line, then one event a
 * line. Appends are whole lines, so a crash can only tear the last line, which `read` ignores.
 */
import { appendFile, mkdir, open, readdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { SessionEvent, SessionHeader } from '../protocol/session.js'
import type { SessionStore } from './store.js'

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
    async list() {
      await ready
      const names = (await readdir(dir)).filter((name) => name.endsWith('.jsonl')).sort()
      const sessions = await Promise.all(names.map((name) => readFile(join(dir, name), 'utf8').then((text) => parse(text, join(dir, name)))))
      return sessions.flatMap((session) => (session ? [session.header] : []))
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
  if (first === undefined) return undefined
  const header = parseLine(first, path, 1) as SessionHeader
  return { header, events: rest.map((line, i) => parseLine(line, path, i + 2) as SessionEvent) }
}

function parseLine(line: string, path: string, number: number): unknown {
  try {
    return JSON.parse(line)
  } catch {
    throw new Error(`${path}:${number} is not valid JSON: the transcript is corrupt`)
  }
}
