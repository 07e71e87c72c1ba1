/**
 * The child process's entry: one runner, talking to the host over the process's IPC channel
 * (started by the host with `serialization: 'advanced'`, so frames cross as structured clones,
 * as between threads). The process lives only as long as that channel: when the host goes away,
 * for whatever reason, the channel closes and the process exits. One blocked in a synchronous
 * loop never hears that: the host's reaper (src/parent/runners/endpoints/reaper.ts) kills it instead.
 */
import { Runner } from './runner.js'
import { subagentError } from '../protocol/errors.js'

if (!process.send) throw subagentError('ERR_SUBAGENT_ENTRY', "subagent-worker's process entry runs only in a child process started by the host")

// Writes handed to the pipe and not yet written: module code waits for them (see Runner).
let pending = 0
let drained: { promise: Promise<void>; resolve: () => void } | undefined
const written = (): void => {
  if (--pending > 0 || !drained) return
  drained.resolve()
  drained = undefined
}

/** Settles once every frame handed to the pipe is written; undefined when none is pending. */
function whenWritten(): Promise<void> | undefined {
  if (pending === 0) return undefined
  if (!drained) {
    let resolve!: () => void
    const promise = new Promise<void>((done) => (resolve = done))
    drained = { promise, resolve }
  }
  return drained.promise
}

const runner = new Runner((frame) => {
  pending++
  process.send!(frame, undefined, {}, written)
}, whenWritten)
process.on('message', (frame: unknown) => runner.receive(frame))
process.on('disconnect', () => process.exit())
// An uncaught error (or unhandled rejection) ends the process, as it would end a worker thread;
// the host hears the cause first, since it cannot see this process's errors.
process.on('uncaughtException', (error) => {
  runner.crashed(error)
  const exit = () => process.exit(1)
  void (whenWritten() ?? Promise.resolve()).then(exit)
})
