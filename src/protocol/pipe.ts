/**
 * Frames on a runner process's pipe (its fd 3): each a 4-byte big-endian length, then the frame
 * as V8's serializer writes it, which is what a structured clone carries between threads.
 *
 * Not Node's IPC channel: its parser runs on the host's event loop unguarded, and code in the
 * process could crash the host through it (a Node-internal `NODE_` message, bytes it cannot
 * decode) or hold it (a length it never sends). Here a frame's length is bounded before anything
 * of it is read, and its bytes are decoded inside a check; a bad one stops the reader.
 */
import { deserialize, serialize } from 'node:v8'
import { messageOf } from './errors.js'
import { ProtocolError } from './validate.js'

/** The pipe's descriptor in the runner process: the host starts it with stdio[3] a pipe. */
export const PIPE_FD = 3

/** Where a runner process keeps its end of the pipe (see worker/process-entry.ts). */
export const RUNNER_PIPE = Symbol.for('subagent-worker.runner-pipe')

const HEADER_BYTES = 4

/** One frame as it goes on the pipe. Throws as a structured clone does (an uncloneable value, one too deep). */
export function pipeFrame(frame: unknown): Buffer {
  const body = serialize(frame)
  const bytes = Buffer.allocUnsafe(HEADER_BYTES + body.length)
  bytes.writeUInt32BE(body.length, 0)
  body.copy(bytes, HEADER_BYTES)
  return bytes
}

/**
 * Reads a pipe's frames from its chunks, as they come. After a bad frame it reads nothing more
 * (and keeps nothing): the caller ends the pipe's process, and the stream still flows to its end.
 */
export class PipeReader {
  readonly #maxBytes: number
  readonly #frame: (frame: unknown) => void
  readonly #failed: (error: Error) => void
  #chunks: Buffer[] = []
  #buffered = 0
  /** The length of the frame being read, once its header is. */
  #length: number | undefined
  #broken = false

  constructor(maxBytes: number, frame: (frame: unknown) => void, failed: (error: Error) => void) {
    this.#maxBytes = maxBytes
    this.#frame = frame
    this.#failed = failed
  }

  push(chunk: Buffer): void {
    if (this.#broken) return
    this.#chunks.push(chunk)
    this.#buffered += chunk.length
    while (!this.#broken) {
      if (this.#length === undefined) {
        if (this.#buffered < HEADER_BYTES) return
        const length = this.#take(HEADER_BYTES).readUInt32BE(0)
        if (length > this.#maxBytes) return this.#break(new ProtocolError(`it was announced as ${length} bytes, over the ${this.#maxBytes} a frame may have`))
        this.#length = length
      }
      if (this.#buffered < this.#length) return
      const body = this.#take(this.#length)
      this.#length = undefined
      let frame: unknown
      try {
        frame = deserialize(body)
      } catch (error) {
        return this.#break(new ProtocolError(`its bytes cannot be decoded: ${messageOf(error)}`))
      }
      this.#frame(frame)
    }
  }

  /** The next `n` buffered bytes (n <= buffered), copied only when they span chunks. */
  #take(n: number): Buffer {
    this.#buffered -= n
    const first = this.#chunks[0]!
    if (first.length > n) {
      this.#chunks[0] = first.subarray(n)
      return first.subarray(0, n)
    }
    if (first.length === n) {
      this.#chunks.shift()
      return first
    }
    const taken = Buffer.allocUnsafe(n)
    let at = 0
    while (at < n) {
      const chunk = this.#chunks[0]!
      const used = Math.min(chunk.length, n - at)
      chunk.copy(taken, at, 0, used)
      at += used
      if (used === chunk.length) this.#chunks.shift()
      else this.#chunks[0] = chunk.subarray(used)
    }
    return taken
  }

  #break(error: Error): void {
    this.#broken = true
    this.#chunks = []
    this.#buffered = 0
    this.#failed(error)
  }
}
