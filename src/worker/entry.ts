/**
 * The worker thread's entry: one runner, talking to the host over the port the host handed it in
 * workerData (see parent/worker-thread.ts: the host paces what it reads from it). The host starts
 * the thread and terminates it; nothing here outlives that.
 */
import { setPriority } from 'node:os'
import { MessagePort, threadId, workerData } from 'node:worker_threads'
import { Runner } from './runner.js'
import { messageOf, subagentError } from '../protocol/errors.js'

const { port, nice } = (workerData ?? {}) as { port?: unknown; nice?: unknown }
if (!(port instanceof MessagePort)) throw subagentError('ERR_SUBAGENT_ENTRY', "subagent-worker's thread entry runs only inside a worker thread started by the host")
// pool.niceIncrement: the host sends a value only on Linux, where a thread has a nice value of its own.
if (typeof nice === 'number') {
  try {
    setPriority(nice)
  } catch (error) {
    // Refused (a seccomp policy may): the thread runs at the host's priority, and says so.
    process.emitWarning(`pool.niceIncrement: runner thread ${threadId} stays at the host's priority (${messageOf(error)})`, { code: 'SUBAGENT_NICE_REFUSED' })
  }
}
const runner = new Runner((frame) => port.postMessage(frame))
port.on('message', (frame: unknown) => runner.receive(frame))
port.on('messageerror', (error: Error) => runner.unreadable(error))
