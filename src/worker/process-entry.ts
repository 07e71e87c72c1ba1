/**
 * The child process's entry: one runner, talking to the host over its pipe (fd 3, see
 * protocol/pipe.ts; the host starts it with no IPC channel). The process lives only as long as
 * that pipe: when the host goes away, for whatever reason, the pipe ends and the process exits.
 * One blocked in a synchronous loop never hears that: the host's reaper
 * (src/parent/runners/endpoints/reaper.ts) kills it instead.
 */
import { EventEmitter } from 'node:events'
import { Socket } from 'node:net'
import { Runner } from './runner.js'
import { subagentError } from '../protocol/errors.js'
import { PIPE_FD, pipeFrame, PipeReader, RUNNER_PIPE } from '../protocol/pipe.js'

const pipe = openPipe()

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

/**
 * The runner's end of the pipe, frame by frame: `send(frame)`, and a 'message' for each of the
 * host's. Module code finds it at RUNNER_PIPE, as a thread's finds its port in `workerData`: the
 * children of one runner share a trust domain (CONTRACT.md §8), and the host trusts none of what
 * comes through it.
 */
class PipeEnd extends EventEmitter {
  send(frame: unknown): void {
    const bytes = pipeFrame(frame) // throws for what cannot cross, before anything is counted
    pending++
    pipe.write(bytes, written)
  }
}
const end = new PipeEnd()
Object.defineProperty(globalThis, RUNNER_PIPE, { value: end })
const runner = new Runner((frame) => end.send(frame), whenWritten)
end.on('message', (frame: unknown) => runner.receive(frame))
// The host's frames: trusted, so unbounded but for the header's own limit.
const reader = new PipeReader(
  2 ** 32 - 1,
  (frame) => end.emit('message', frame),
  (error) => {
    throw error
  },
)
pipe.on('data', (chunk: Buffer) => reader.push(chunk))
pipe.on('end', () => process.exit())
pipe.on('error', () => process.exit())
// An uncaught error (or unhandled rejection) ends the process, as it would end a worker thread;
// the host hears the cause first, since it cannot see this process's errors.
process.on('uncaughtException', (error) => {
  runner.crashed(error)
  const exit = () => process.exit(1)
  void (whenWritten() ?? Promise.resolve()).then(exit)
})

function openPipe(): Socket {
  try {
    return new Socket({ fd: PIPE_FD, readable: true, writable: true })
  } catch (error) {
    throw subagentError('ERR_SUBAGENT_ENTRY', "subagent-worker's process entry runs only in a child process started by the host (it has no pipe to a host)", { cause: error })
  }
}
