/**
 * The channel floor's worker: one persistent channel to the host, nothing of the library loaded.
 * It echoes every message of each batch it receives, its replies coalesced into one postMessage
 * per event-loop turn, as the library's runner does with its frames.
 */
import { parentPort } from 'node:worker_threads'

const port = parentPort
if (port === null) throw new Error('channel-floor-worker.js runs only in a worker thread')

let replies: unknown[] = []
let scheduled = false

const flush = () => {
  scheduled = false
  const batch = replies
  replies = []
  port.postMessage(batch)
}

port.on('message', (batch: unknown[]) => {
  for (const message of batch) replies.push(message)
  if (!scheduled) {
    scheduled = true
    setImmediate(flush)
  }
})
