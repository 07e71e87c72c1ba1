/**
 * The benchmark's agent module: every runner (worker thread or child process) imports it, and so
 * does the host, so children on every transport run the very same tool code. Its tools do their
 * work where the child runs, which is what S5 (CPU in parallel) and S8 (a child that never
 * yields) measure; its models answer where the child runs, with no RPC to the host (S2, S3, S9, S9u).
 * It imports nothing outside this package, so a child process reads it under the default sandbox.
 */
import { BroadcastChannel, isMainThread, threadId } from 'node:worker_threads'
import { defineAgentModule, defineTool, ScriptedModel, textResponse, type Model, type StreamChunk } from 'subagent-worker'
import { shapeOf, STREAM_MODEL, streamEntry } from './stream-script.js'
import { USER_STREAM_MODEL, userStreamModel } from './user-model.js'
import { work } from './work.js'

const none = { type: 'object', properties: {} }

/**
 * A module model for zero-RPC figures: it answers every request with the same short text. It is
 * not a ScriptedModel because a module model lives as long as its thread and a ScriptedModel
 * records every request it ever served.
 */
const echo: Model = {
  async *stream(): AsyncGenerator<StreamChunk> {
    yield* textResponse('done')
  },
}

/**
 * S9's module model: the paced stream whose shape the child's model id names (stream-script.ts),
 * played by a fresh ScriptedModel per request for the same reason.
 */
const stream: Model = {
  stream: (request) => new ScriptedModel([streamEntry(shapeOf(request.model))]).stream(request),
}

/** Held before answering: long enough for a batch started at once to be placed before any child of it ends. */
const PID_HOLD_MS = 100

/**
 * Answers with the pid of the process it runs in: how the bench learns a process host's runners,
 * to read their memory and CPU (runners.ts). Not a tool, so no host model is needed to call it.
 */
const pid: Model = {
  async *stream() {
    await new Promise((resolve) => setTimeout(resolve, PID_HOLD_MS))
    yield* textResponse(String(process.pid))
  },
}

/**
 * S11's way to kill a runner thread (scenarios/moves.ts): each worker thread says it is up, and
 * exits when told its id, a crash wherever its children are. Unref'd: it keeps no thread alive.
 */
export const RUNNERS_CHANNEL = 'subagent-worker bench: runner threads'
export type RunnerSignal = { up: number } | { exit: number }

if (!isMainThread) {
  const channel = new BroadcastChannel(RUNNERS_CHANNEL)
  channel.onmessage = (message) => {
    const data = (message as { data: RunnerSignal }).data
    if ('exit' in data && data.exit === threadId) process.exit(70)
  }
  channel.unref()
  channel.postMessage({ up: threadId } satisfies RunnerSignal)
}

export default defineAgentModule({
  models: { 'bench-echo': echo, [STREAM_MODEL]: stream, [USER_STREAM_MODEL]: userStreamModel, 'bench-pid': pid },
  tools: [
    defineTool<{ iterations: number }>({
      name: 'burn',
      description: 'Does the given number of iterations of integer work on the CPU, then answers.',
      parameters: { type: 'object', properties: { iterations: { type: 'integer', minimum: 0 } }, required: ['iterations'] },
      execute({ iterations }) {
        // The result is returned so the loop cannot be optimized away.
        return `burnt ${work(iterations) & 1}`
      },
    }),
    defineTool({
      name: 'spin',
      description: 'Loops forever and never checks for cancellation.',
      parameters: none,
      execute() {
        for (;;);
      },
    }),
  ],
})
