/**
 * The worker thread's entry: one runner, talking to the host over the thread's own port. The host
 * starts the thread and terminates it; nothing here outlives that.
 */
import { parentPort } from 'node:worker_threads'
import { Runner } from './runner.js'

if (!parentPort) throw new Error("subagent-worker's thread entry runs only inside a worker thread started by the host")
const port = parentPort
const runner = new Runner((frame) => port.postMessage(frame))
port.on('message', (frame: unknown) => runner.receive(frame))
port.on('messageerror', (error: Error) => runner.unreadable(error))
