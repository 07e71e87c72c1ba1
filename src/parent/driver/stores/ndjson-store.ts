/**
 * A durable session store: `<dir>/<id>.jsonl`, the header on the first line, then one event a
 * line. A crash can only tear the last line, which `read` ignores and the next append cuts off.
 *
 * One writer a session: the first write of a session by a store takes `<id>.jsonl.lock` (its
 * process id and the store's token; see ndjson-lock.ts) and keeps it until `release(id)` or
 * `delete(id)`. Another store, host or process that tries to write the same session is refused
 * while that writer lives; a lock whose process is gone is taken over, so a crash cannot leave it
 * stuck. Within a store, a session's writes run one after another, so lines never interleave.
 */
import { randomUUID } from 'node:crypto'
import { mkdir, open, readdir, readFile, rm, writeFile, type FileHandle } from 'node:fs/promises'
import { isAbsolute, join } from 'node:path'
import type { SessionEvent, SessionHeader } from '../../../protocol/shapes/session.js'
import { isSessionEvent } from '../../../protocol/validators.js'
import { takeLock } from './ndjson-lock.js'
import { InvalidOptionError } from '../../options.js'
import { checkSessionId, matches, readHeader, SessionLiveError, type SessionList, type SessionStore } from './store.js'
import { subagentError } from '../../../protocol/errors.js'

const TAIL_CHUNK = 64 * 1024

const lines = (items: readonly unknown[]) => items.map((item) => `${JSON.stringify(item)}\n`).join('')

export function createNdjsonStore(dir: string): SessionStore {
  if (typeof dir !== 'string' || dir === '') throw subagentError('ERR_SUBAGENT_DEFINITION', 'createNdjsonStore needs a directory path')
  // As every other path option: a relative one would name another folder from another working directory.
  if (!isAbsolute(dir)) throw new InvalidOptionError('createNdjsonStore dir', dir, 'an absolute path (path.resolve(dir) if it is meant from the working directory)')
  const ready = mkdir(dir, { recursive: true })
  const file = (id: string) => join(dir, `${checkSessionId(id)}.jsonl`)
  const writers = new Writers(file)

  return {
    async create(header) {
      const path = file(header.id)
      return writers.serial(header.id, async () => {
        await ready
        await writers.acquire(header.id)
        await writeFile(path, lines([header]), { flag: 'wx' }).catch(async (error: NodeJS.ErrnoException) => {
          await writers.release(header.id)
          throw error.code === 'EEXIST' ? subagentError('ERR_SUBAGENT_DUPLICATE', `session "${header.id}" already exists in ${dir}`) : error
        })
      })
    },
    async append(id, events) {
      const path = file(id)
      return writers.serial(id, async () => {
        // Appending nothing still claims the session: how a resumed agent makes sure it is the only writer.
        await writers.acquire(id)
        if (events.length > 0) await appendWhole(path, lines(events))
      })
    },
    async read(id) {
      const path = file(id)
      let text: string
      try {
        text = await readFile(path, 'utf8')
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
        throw error
      }
      const session = parse(text, path)
      if (session) named(session.header, id, path)
      return session
    },
    async list(filter) {
      await ready
      return listSessions(dir, filter)
    },
    async delete(id) {
      const path = file(id)
      return writers.serial(id, async () => {
        await ready
        if (writers.owns(id)) throw new SessionLiveError(id) // this store is its live writer
        await writers.acquire(id) // never from under another live writer
        await rm(path, { force: true })
        await writers.release(id)
      })
    },
    async release(id) {
      file(id)
      return writers.serial(id, () => writers.release(id))
    },
  }
}

/** One store's hold on its sessions: each session's writes run in order, and the locks it took are its own. */
class Writers {
  readonly #file: (id: string) => string
  readonly #token = randomUUID()
  /** Sessions this store holds the lock of. */
  readonly #owned = new Set<string>()
  /** Each session's writes, in order. */
  readonly #queues = new Map<string, Promise<unknown>>()

  constructor(file: (id: string) => string) {
    this.#file = file
  }

  owns(id: string): boolean {
    return this.#owned.has(id)
  }

  serial<T>(id: string, write: () => Promise<T>): Promise<T> {
    const queues = this.#queues
    const next = (queues.get(id) ?? Promise.resolve()).then(write, write)
    const settled = next.then(
      () => undefined,
      () => undefined,
    )
    queues.set(id, settled)
    void settled.then(() => queues.get(id) === settled && queues.delete(id))
    return next
  }

  async acquire(id: string): Promise<void> {
    if (this.#owned.has(id)) return
    await takeLock(`${this.#file(id)}.lock`, { pid: process.pid, store: this.#token }, id)
    this.#owned.add(id)
  }

  async release(id: string): Promise<void> {
    if (!this.#owned.delete(id)) return
    await rm(`${this.#file(id)}.lock`, { force: true })
  }
}

/** Every session in `dir` that matches `filter`; one corrupt transcript must not hide the healthy ones: it is listed apart, with why. */
async function listSessions(dir: string, filter: Parameters<SessionStore['list']>[0]): Promise<SessionList> {
  const names = (await readdir(dir)).filter((name) => name.endsWith('.jsonl')).sort()
  const list: SessionList = { sessions: [], unreadable: [] }
  const read = await Promise.allSettled(
    names.map(async (name) => {
      const path = join(dir, name)
      const header = headerOf(await firstLine(path), path)
      return header && named(header, name.slice(0, -'.jsonl'.length), path)
    }),
  )
  read.forEach((outcome, i) => {
    const id = names[i]!.slice(0, -'.jsonl'.length)
    if (outcome.status === 'rejected') list.unreadable.push({ id, error: (outcome.reason as Error).message })
    else if (outcome.value && matches(outcome.value, filter)) list.sessions.push(outcome.value)
  })
  return list
}

/** Appends whole lines after the last whole line: a tail torn by a crash or a failed write is cut off first. */
async function appendWhole(path: string, text: string): Promise<void> {
  const handle = await open(path, 'r+')
  try {
    let end = await wholeEnd(handle)
    const bytes = Buffer.from(text, 'utf8')
    for (let written = 0; written < bytes.length; ) {
      const { bytesWritten } = await handle.write(bytes, written, bytes.length - written, end)
      written += bytesWritten
      end += bytesWritten
    }
  } finally {
    await handle.close()
  }
}

/** The size of the file's whole lines; anything after the last newline is truncated away. */
async function wholeEnd(handle: FileHandle): Promise<number> {
  const { size } = await handle.stat()
  let end = size
  const buffer = Buffer.alloc(TAIL_CHUNK)
  while (end > 0) {
    const start = Math.max(0, end - TAIL_CHUNK)
    const { bytesRead } = await handle.read(buffer, 0, end - start, start)
    const newline = buffer.subarray(0, bytesRead).lastIndexOf(0x0a)
    if (newline >= 0) {
      end = start + newline + 1
      break
    }
    end = start
  }
  if (end < size) await handle.truncate(end)
  return end
}

/** A transcript is read under the id in its file name: a copied or renamed file must not pass for another session. */
function named(header: SessionHeader, id: string, path: string): SessionHeader {
  if (header.id !== id) {
    throw subagentError('ERR_SUBAGENT_STORE', `${path} holds session "${header.id}", not "${id}": the file was copied or renamed; give it its own name back (${header.id}.jsonl)`)
  }
  return header
}

/** Undefined when not even the header line was completely written. */
function parse(text: string, path: string): { header: SessionHeader; events: SessionEvent[] } | undefined {
  const rows = text.split('\n')
  // A file always ends with a newline; anything after the last one is a torn write.
  rows.pop()
  const [first, ...rest] = rows
  const header = headerOf(first, path)
  if (!header) return undefined
  const events = rest.map((line, i) => {
    const event = parseLine(line, path, i + 2)
    if (!isSessionEvent(event)) throw subagentError('ERR_SUBAGENT_STORE', `${path}:${i + 2} is not a session event: the transcript is corrupt`)
    // Only seq and type are checked, as for any parent's events (CONTRACT: any object of that shape).
    return event as SessionEvent
  })
  return { header, events }
}

/** The header from a transcript's first line (undefined for a torn one); throws when it is not a header. */
function headerOf(line: string | undefined, path: string): SessionHeader | undefined {
  if (line === undefined) return undefined
  const header = parseLine(line, path, 1)
  if (typeof header !== 'object' || header === null || typeof (header as { id?: unknown }).id !== 'string') {
    throw subagentError('ERR_SUBAGENT_STORE', `${path}:1 is not a session header: the transcript is corrupt`)
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
      const buffer = Buffer.alloc(TAIL_CHUNK)
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
    throw subagentError('ERR_SUBAGENT_STORE', `${path}:${number} is not valid JSON: the transcript is corrupt`)
  }
}
