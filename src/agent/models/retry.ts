/**
 * The request policy every model adapter shares (`OpenAICompatibleModel`, `fromLanguageModel`):
 * a concurrency bound across every child using the model, a silence watchdog, and retries of an
 * attempt that failed before any chunk reached the child (429, 5xx, a lost connection, no answer
 * in time), with exponential backoff and jitter, honouring the endpoint's retry-after. Once a
 * chunk has reached the child the request is never sent again: the child would see the answer
 * twice, and the endpoint would bill it twice.
 */
import { ModelEndpointError } from './endpoint-failure.js'
import { Silence } from './silence.js'
import { Slots } from '../slots.js'
import { sleep } from './sleep.js'
import { subagentError } from '../../protocol/errors.js'

export interface RequestPolicyOptions {
  /** Retries of a request that failed before any chunk reached the child. Default 2. */
  maxRetries?: number
  /** Requests in flight at once, across every child using this model; more wait their turn. Default: no limit. */
  maxConcurrency?: number
  /** How long the endpoint may stay silent: before its answer begins, and between two chunks. Default 600000 (10 minutes). */
  timeoutMs?: number
}

/** What an adapter makes of a failed attempt. */
export interface Failure {
  /** What the child's diagnostic says (the policy adds how many retries were spent). */
  message: string
  /** Another attempt may succeed (asked only while nothing has reached the child). */
  retryable: boolean
  status?: number
  /** How long the endpoint asked to wait before the next attempt. */
  retryAfterMs?: number
}

/** Where the attempt was when it failed. */
export interface AttemptState {
  /** A chunk has reached the child. */
  started: boolean
}

/** One try at the request: its chunks, read under `signal` (the watchdog's, which follows the request's). */
export type Attempt<T> = (signal: AbortSignal) => AsyncIterable<T>
/** Names a failure; an error it cannot name (a bug, a malformed stream) is rethrown as it is. */
export type Judge = (error: unknown, state: AttemptState) => Failure | undefined

const DEFAULT_MAX_RETRIES = 2
const DEFAULT_TIMEOUT_MS = 600_000
const BASE_DELAY_MS = 500
const MAX_DELAY_MS = 8_000

export class RequestPolicy {
  readonly #maxRetries: number
  readonly #timeoutMs: number
  readonly #slots: Slots | undefined

  /** `who` names the adapter in option errors (`fromLanguageModel`, `OpenAICompatibleModel`). */
  constructor(options: RequestPolicyOptions, who: string) {
    const { maxRetries = DEFAULT_MAX_RETRIES, maxConcurrency, timeoutMs = DEFAULT_TIMEOUT_MS } = checkOptions(options, who)
    this.#maxRetries = maxRetries
    this.#timeoutMs = timeoutMs
    this.#slots = maxConcurrency === undefined ? undefined : new Slots(maxConcurrency)
  }

  /** The request's chunks: one attempt after another until one succeeds, fails for good or a chunk has gone out and it fails. */
  async *run<T>(signal: AbortSignal, attempt: Attempt<T>, judge: Judge): AsyncGenerator<T> {
    const release = await this.#slots?.acquire(signal)
    try {
      for (let retries = 0; ; retries++) {
        const outcome = yield* this.#try(signal, attempt, judge)
        if (outcome === 'done') return
        const { failure, started } = outcome
        if (started || !failure.retryable || retries >= this.#maxRetries) throw endpointError(failure, retries)
        await sleep(failure.retryAfterMs ?? backoff(retries), signal)
      }
    } finally {
      release?.()
    }
  }

  async *#try<T>(signal: AbortSignal, attempt: Attempt<T>, judge: Judge): AsyncGenerator<T, 'done' | { failure: Failure; started: boolean }> {
    const silence = new Silence(this.#timeoutMs, signal)
    let started = false
    try {
      silence.arm()
      for await (const chunk of attempt(silence.signal)) {
        silence.arm()
        started = true
        yield chunk
      }
      // An attempt the caller's abort ended quietly (the HTTP client does) ends the stream with that abort, as a throw would.
      if (signal.aborted) throw signal.reason
      if (silence.expired) return { failure: this.#silent(started), started }
      return 'done'
    } catch (error) {
      if (signal.aborted) throw signal.reason
      if (silence.expired) return { failure: this.#silent(started), started }
      const failure = judge(error, { started })
      if (!failure) throw error
      return { failure, started }
    } finally {
      silence.dispose()
    }
  }

  #silent(started: boolean): Failure {
    return started
      ? { message: `the model endpoint sent nothing for ${this.#timeoutMs} ms (timeoutMs), so the request was abandoned`, retryable: false }
      : { message: `the model endpoint did not answer within ${this.#timeoutMs} ms (timeoutMs)`, retryable: true }
  }
}

function endpointError(failure: Failure, retries: number): ModelEndpointError {
  const spent = retries === 0 ? '' : `, after ${retries} ${retries === 1 ? 'retry' : 'retries'}`
  return new ModelEndpointError(`${failure.message}${spent}`, failure.status === undefined ? {} : { status: failure.status })
}

/** 0.5 s, 1 s, 2 s, ... up to 8 s, each shortened by up to a quarter so that children that failed together do not retry together. */
function backoff(retries: number): number {
  return Math.min(BASE_DELAY_MS * 2 ** retries, MAX_DELAY_MS) * (1 - Math.random() * 0.25)
}

function checkOptions(options: RequestPolicyOptions, who: string): RequestPolicyOptions {
  const { maxRetries, maxConcurrency, timeoutMs } = options
  if (maxRetries !== undefined && !(Number.isSafeInteger(maxRetries) && maxRetries >= 0)) throw subagentError('ERR_SUBAGENT_ARGUMENT', `${who} maxRetries must be a whole number >= 0`)
  if (timeoutMs !== undefined && !(Number.isSafeInteger(timeoutMs) && timeoutMs > 0 && timeoutMs <= 2 ** 31 - 1)) {
    throw subagentError('ERR_SUBAGENT_ARGUMENT', `${who} timeoutMs must be a whole number of milliseconds from 1 to 2147483647`)
  }
  if (maxConcurrency !== undefined && !(Number.isSafeInteger(maxConcurrency) && maxConcurrency >= 1)) throw subagentError('ERR_SUBAGENT_ARGUMENT', `${who} maxConcurrency must be a whole number >= 1`)
  return options
}
