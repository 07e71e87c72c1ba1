/**
 * The ndjson store's writer lock, `<id>.jsonl.lock`: one writer a session among stores, hosts and
 * processes, and never stuck after a crash. Its content names its holder (a process id and the
 * store's token) and carries a nonce of the claim, so no two locks ever read the same.
 *
 * A claim is exclusive: the content is written to a file of its own, which is then hard-linked
 * into place. The link fails if the name exists, and the lock is never seen empty or half written.
 *
 * Taking over the lock of a process that is gone is exclusive too: a stale lock is removed only by
 * the holder of its take-over marker, `<lock>.takeover-<digest of its content>`, itself claimed
 * this same way (so a taker that dies holding a marker is taken over in turn). Under the marker
 * the lock is read again, and removed only if it still is that stale lock; a stale lock leaves
 * only that way, so it is removed once. Then the lock is claimed again like any other, by link.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto'
import { link, readFile, rm, unlink, writeFile } from 'node:fs/promises'
import { subagentError } from '../../../protocol/errors.js'

export interface Holder {
  pid: number
  store: string
}

/** How a claim ended: taken; refused, naming the live process that holds the lock or is taking it over; or given up. */
type Claim = { kind: 'taken' } | { kind: 'held'; holder: Holder; takingOver: boolean } | { kind: 'contended' }

/** Claims per lock or marker before giving up: each failed one means another writer won a round. */
const ATTEMPTS = 8

/** Takes a session's lock, or says who holds it; a lock left by a process that is gone is taken over. */
export async function takeLock(lock: string, mine: Holder, id: string): Promise<void> {
  const claim = await claimFile(lock, mine)
  if (claim.kind === 'taken') return
  if (claim.kind === 'contended') throw subagentError('ERR_SUBAGENT_STORE', `session "${id}": could not take ${lock}, another writer keeps taking it`)
  const who = claim.holder.pid === process.pid ? 'another store in this process' : `process ${claim.holder.pid}`
  const what = claim.takingOver ? `being taken over by ${who} (its last writer is gone)` : `being written by ${who}`
  throw subagentError('ERR_SUBAGENT_STORE', 
    `session "${id}" is ${what}: a transcript has one writer at a time. Close or dispose the other writer first (if none runs, delete ${lock})`,
  )
}

async function claimFile(path: string, mine: Holder): Promise<Claim> {
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    if (await linkInPlace(path, mine)) return { kind: 'taken' }
    const found = await readLock(path)
    if (!found) continue // released meanwhile
    if (found.holder && holds(found.holder)) return { kind: 'held', holder: found.holder, takingOver: false }
    const removal = await removeStale(path, found.raw, mine)
    if (removal.kind === 'held') return { ...removal, takingOver: true }
    if (removal.kind === 'contended') return removal
  }
  return { kind: 'contended' }
}

/** Removes the stale lock `raw` from `path` if it is still there, holding its take-over marker meanwhile. */
async function removeStale(path: string, raw: Buffer, mine: Holder): Promise<Claim> {
  const marker = `${path}.takeover-${createHash('sha256').update(raw).digest('hex').slice(0, 16)}`
  const claim = await claimFile(marker, mine)
  if (claim.kind !== 'taken') return claim
  try {
    const now = await readLock(path)
    if (now?.raw.equals(raw)) await unlink(path)
  } finally {
    await rm(marker, { force: true })
  }
  return claim
}

/** Puts a lock naming `mine` at `path` unless one is there: false when one is. */
async function linkInPlace(path: string, mine: Holder): Promise<boolean> {
  const staged = `${path}.${randomBytes(8).toString('hex')}.claim`
  await writeFile(staged, JSON.stringify({ ...mine, claim: randomUUID() }), { flag: 'wx' })
  try {
    await link(staged, path)
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false
    throw error
  } finally {
    await rm(staged, { force: true })
  }
}

/** A lock's bytes and the holder they name (none when they name nobody: a lock torn by an older version); undefined when there is none. */
async function readLock(path: string): Promise<{ raw: Buffer; holder: Holder | undefined } | undefined> {
  let raw: Buffer
  try {
    raw = await readFile(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw error
  }
  try {
    const holder = JSON.parse(raw.toString('utf8')) as Partial<Holder>
    return { raw, holder: typeof holder.pid === 'number' && typeof holder.store === 'string' ? (holder as Holder) : undefined }
  } catch {
    return { raw, holder: undefined }
  }
}

/** Whether the lock's writer still lives: a store of this process, or a process that exists. */
function holds(holder: Holder): boolean {
  if (holder.pid === process.pid) return true
  try {
    process.kill(holder.pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM' // it exists, and is not ours to signal
  }
}
