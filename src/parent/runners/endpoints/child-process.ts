/**
 * A runner in a child process, under Node's permission model (see sandbox.ts). The process talks
 * over a pipe of its own (its fd 3, see protocol/pipe.ts), frames crossing as structured clones,
 * as between threads; it has no IPC channel, whose parser code in the process could crash the
 * host through. Its 'close' event comes only after the pipe has closed, so every frame it sent
 * has been read by then: that is when its children are settled.
 */
import { spawn } from 'node:child_process'
import type { Socket } from 'node:net'
import { RUNNER_BOUNDS } from '../../../protocol/bounds.js'
import { messageOf } from '../../../protocol/errors.js'
import { PIPE_FD, pipeFrame, PipeReader } from '../../../protocol/pipe.js'
import type { Fault, RunnerKind } from '../channel.js'
import { lowerProcess } from './priority.js'
import { forgetRunner, watchRunner } from './reaper.js'
import { RUNNER_CONDITION, runnerEntry } from './runner-code.js'
import type { Endpoint, EndpointEvents, Exit } from '../runner-site.js'

const KIND: RunnerKind = { noun: 'child process', ended: 'killed' }

/** The end of the process's stderr kept to name an out-of-memory death (V8 says so there). */
const STDERR_TAIL_BYTES = 2048

/**
 * How long a process whose pipe ended may take to exit (its runner exits when its pipe goes)
 * before it is killed: module code that closed the pipe and blocks the loop would otherwise keep
 * it, and its children, for good, the heartbeat not judging a runner whose children run module code.
 */
const PIPE_END_EXIT_MS = 1000

export interface ProcessSettings {
  /** The process's whole environment (never the host's). */
  env: Record<string, string>
  /** Node flags: the permission model's and the heap caps. */
  execArgv: string[]
  /** Added to the host's nice value (priority.ts). */
  niceIncrement: number
}

export function openChildProcess(settings: ProcessSettings, events: EndpointEvents): Endpoint {
  const child = spawn(process.execPath, [...settings.execArgv, RUNNER_CONDITION, runnerEntry('process-entry')], { env: settings.env, stdio: ['ignore', 'inherit', 'pipe', 'pipe'] })
  const pipe = child.stdio[PIPE_FD] as Socket
  const pid = child.pid
  if (pid !== undefined) {
    lowerProcess(pid, settings.niceIncrement)
    // Killed with the host even while blocked in a synchronous loop (see reaper.ts).
    watchRunner(pid)
    child.once('exit', () => forgetRunner(pid))
  }
  let tail = ''
  child.stderr?.on('data', (chunk: Buffer) => {
    process.stderr.write(chunk) // the child's own output is the user's: pass it on
    tail = (tail + chunk.toString('utf8')).slice(-STDERR_TAIL_BYTES)
  })
  // A bad frame stops the reader, not the stream: the process is stopped, and its 'close' still comes.
  const reader = new PipeReader(RUNNER_BOUNDS.pipeFrameBytes, events.frame, events.unreadable)
  pipe.on('data', (chunk: Buffer) => reader.push(chunk))
  pipe.on('error', () => {}) // a process going away breaks its pipe; its 'close' settles its children
  let pipeLost: NodeJS.Timeout | undefined
  let killedForPipe = false
  pipe.once('end', () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    pipeLost = setTimeout(() => {
      killedForPipe = true
      child.kill('SIGKILL')
    }, PIPE_END_EXIT_MS)
  })
  child.once('exit', () => clearTimeout(pipeLost))
  child.on('error', (error) => {
    // The process could not be started: no 'close' will follow. (A failed send is followed by one.)
    if (child.pid === undefined) {
      events.crashed(error)
      events.exited({ code: undefined })
    }
  })
  child.on('close', (code, signal) => events.exited({ code: code ?? undefined, ...(signal ? { signal } : {}) }))
  const hold = (held: boolean) => {
    // A piped stdio stream is a socket, though typed as a plain stream.
    for (const handle of [child, pipe, child.stderr as Socket | null]) {
      if (held) handle?.ref()
      else handle?.unref()
    }
  }
  // An idle process never keeps the host alive; one with children does.
  hold(false)
  return {
    kind: KIND,
    label: `child process ${child.pid ?? '(not started)'}`,
    send(frame) {
      // A process going away drops what is sent to it; its 'close' settles its children.
      if (pipe.writable) pipe.write(pipeFrame(frame))
    },
    terminate: () => void child.kill('SIGKILL'),
    hold,
    faultOf: (exit, crash) =>
      killedForPipe
        ? { stopReason: 'error', diagnostic: `the child's process closed its pipe to the host and did not exit within ${PIPE_END_EXIT_MS} ms (something on it never yields), so it was killed` }
        : faultOf(exit, crash, tail),
  }
}

/** Names the cause of a process's end: an uncaught error, the heap cap, a signal or an exit code. */
function faultOf(exit: Exit, crash: Error | undefined, stderr: string): Fault {
  if (crash) return { stopReason: 'error', diagnostic: `the child's process crashed with an uncaught ${crash.name}: ${messageOf(crash)}` }
  if (/heap limit|heap out of memory/i.test(stderr)) {
    return { stopReason: 'error', diagnostic: "the child's process ran out of memory (its heap cap, pool.resourceLimits.maxOldGenerationSizeMb, was reached)" }
  }
  if (exit.signal) return { stopReason: 'error', diagnostic: `the child's process was ended by ${exit.signal}` }
  const how = exit.code === undefined ? '' : ` with code ${exit.code}`
  return { stopReason: 'error', diagnostic: `the child's process exited${how} (process.exit was called in it)` }
}
