/**
 * A runner on a worker thread, a host's or a node's. Its frames cross on a port of a channel of the host's own (handed
 * to the thread in workerData), not on the thread's built-in port, because this one the host can
 * pace: it stops listening once it has read its share of a turn (the frames wait, unread, in the
 * port), and closes it to drop a distrusted runner's frames unread. The port closes after the
 * last frame the thread sent, so the thread's 'exit' and the port's 'close' together are when
 * its children are settled. The thread's own port carries nothing of the runner's: a message on
 * it is a protocol violation.
 */
import { MessageChannel, type ResourceLimits } from 'node:worker_threads'
import { messageOf } from '../../../protocol/errors.js'
import { ProtocolError } from '../../../protocol/validate.js'
import type { Fault, RunnerKind } from '../channel.js'
import type { Endpoint, EndpointEvents, Exit } from '../runner-site.js'
import { threadNice } from './priority.js'
import { startThread } from './thread-start.js'

const KIND: RunnerKind = { noun: 'worker thread', ended: 'terminated' }

/** How long the frame port may stay open after the thread's exit before the host closes it (its close is normally at once). */
const PORT_CLOSE_WAIT_MS = 1000

/**
 * A runner thread's young generation, unless `pool.resourceLimits` sets one: what Node 20 and 22
 * give a worker thread on a host of 4 GB or more (V8 sizes it from the memory; less on a smaller
 * one). Node 24 gives it up to 192 MB, and a runner there kept taking fresh pages from the kernel,
 * each zeroed on its fault (under S3's load 1.5-2.2 faults a delegation in most runs, against
 * about 0.01 with this cap; BENCHMARKS.md, "A runner thread's young generation").
 */
export const RUNNER_YOUNG_GENERATION_MB = 48

/** A runner thread's limits: the user's, over the young generation above. */
export function runnerLimits(limits: ResourceLimits | undefined): ResourceLimits {
  return { maxYoungGenerationSizeMb: RUNNER_YOUNG_GENERATION_MB, ...limits }
}

export interface ThreadSettings {
  resourceLimits: ResourceLimits | undefined
  /** The thread's whole `process.env` (never the host's). */
  env: Record<string, string>
  /** Added to the host's nice value (priority.ts). */
  niceIncrement: number
}

export function openWorkerThread(settings: ThreadSettings, events: EndpointEvents): Endpoint {
  const { port1: port, port2: runnerPort } = new MessageChannel()
  const worker = startThread({
    env: settings.env,
    workerData: { port: runnerPort, nice: threadNice(settings.niceIncrement) },
    transferList: [runnerPort],
    resourceLimits: runnerLimits(settings.resourceLimits),
  })
  let held = false
  const hold = (wanted: boolean) => {
    held = wanted
    for (const handle of [worker, port]) {
      if (held) handle.ref()
      else handle.unref()
    }
  }
  const pause = (paused: boolean) => {
    // Without a 'message' listener a port delivers nothing: the frames wait in it, unread.
    if (paused) port.off('message', events.frame)
    else if (port.listenerCount('message') === 0) {
      port.on('message', events.frame)
      hold(held) // a new listener refs the port
    }
  }
  const stray = () => {
    worker.removeAllListeners('message')
    events.unreadable(new ProtocolError("it posted on the thread's own port, which a runner never uses"))
  }
  let open = 2 // the thread and the port
  const gone = (exit: Exit) => {
    if (--open === 0) events.exited(exit)
  }
  let exit: Exit = { code: undefined }
  port.on('message', events.frame)
  port.on('messageerror', events.unreadable)
  port.once('close', () => gone(exit))
  worker.on('message', stray)
  worker.on('error', events.crashed)
  worker.on('exit', (code: number) => {
    exit = { code }
    gone(exit)
    setTimeout(() => port.close(), PORT_CLOSE_WAIT_MS).unref()
  })
  // An idle thread never keeps the process alive; one with children does (see hold).
  hold(false)
  return {
    kind: KIND,
    label: `worker thread ${worker.threadId}`,
    send: (frame) => port.postMessage(frame),
    terminate: () => void worker.terminate(),
    hold,
    faultOf,
    pause,
    discard: () => port.close(),
  }
}

/** Names the cause of a thread's end: the heap limit, an uncaught error, or how it exited. */
function faultOf(exit: Exit, crash: Error | undefined): Fault {
  if (crash) {
    const { name = 'Error', code } = crash as Error & { code?: unknown }
    if (code === 'ERR_WORKER_OUT_OF_MEMORY') {
      return { stopReason: 'error', diagnostic: `the child's worker thread ran out of memory (its resourceLimits heap cap was reached): ${crash.message}` }
    }
    return { stopReason: 'error', diagnostic: `the child's worker thread crashed with an uncaught ${name}: ${messageOf(crash)}` }
  }
  const how = exit.code === undefined ? '' : ` with code ${exit.code}`
  return { stopReason: 'error', diagnostic: `the child's worker thread exited${how} (process.exit was called on that thread, or it was terminated)` }
}
