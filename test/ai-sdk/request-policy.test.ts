/**
 * fromLanguageModel under the shared request policy, against a real provider
 * (`@ai-sdk/openai-compatible`) talking to a real HTTP server on 127.0.0.1: retries after
 * retry-after, statuses and the provider's message in the diagnostic, the concurrency bound across
 * children, the address and cause of an unreachable endpoint, and a stream cut mid-answer, which is
 * never sent again.
 */
import type { ServerResponse } from 'node:http'
import { createOpenAICompatible } from '@ai-sdk/openai-compatible'
import { afterEach, describe, expect, it } from 'vitest'
import type { Host, SubagentRun } from 'subagent-worker'
import { fromLanguageModel, type FromLanguageModelOptions } from 'subagent-worker/ai-sdk'
import { deadEndpoint, httpError, modelServer, sse, textChunk, type Handler } from '../support/model-server.js'
import { eventOf } from '../support/driver-helpers.js'
import { closeHosts, openHost } from './support.js'

const servers: Array<{ close(): Promise<void> }> = []
afterEach(async () => {
  await closeHosts()
  await Promise.all(servers.splice(0).map((server) => server.close()))
})

async function serve(handlers: Handler[]) {
  const server = await modelServer(handlers)
  servers.push(server)
  return server
}

/** A host whose children use the provider's model for `url`, wrapped by fromLanguageModel. */
function hostFor(transport: 'inline' | 'worker', url: string, options?: FromLanguageModelOptions): Host {
  const provider = createOpenAICompatible({ name: 'local', baseURL: url })
  const host = openHost(transport)
  host.models.register('local', fromLanguageModel(provider.chatModel('m'), options))
  return host
}

async function delegate(host: Host, onStart: (run: SubagentRun) => void = () => {}) {
  const parent = host.createAgent({ options: { provider: 'local', model: 'm' } })
  const run = await host.spawn.start({ prompt: 'go', parent, signal: new AbortController().signal })
  onStart(run)
  const result = await run.result
  await run.dispose()
  return result
}

const answer: Handler = (_, __, res) => sse(res, [textChunk('after the wait', 'stop')])

describe.each(['inline', 'worker'] as const)('fromLanguageModel over HTTP [%s]', (transport) => {
  it('a 429 is retried after the retry-after the server asked for, then the answer streams', async () => {
    const at: number[] = []
    const api = await serve([
      (_, __, res) => {
        at.push(performance.now())
        httpError(res, 429, 'Rate limit reached', { 'retry-after': '1' })
      },
      (body, req, res) => {
        at.push(performance.now())
        answer(body, req, res)
      },
    ])
    const result = await delegate(hostFor(transport, api.url))
    expect(result).toMatchObject({ output: [{ type: 'text', text: 'after the wait' }], stopReason: 'completed' })
    expect(api.bodies).toHaveLength(2)
    expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(900)
  })

  it('a 5xx still failing after the retries names its status, the provider message and the retries spent', async () => {
    const unavailable: Handler = (_, __, res) => httpError(res, 503, 'The engine is overloaded', { 'retry-after-ms': '10' })
    const api = await serve([unavailable, unavailable])
    const result = await delegate(hostFor(transport, api.url, { maxRetries: 1 }))
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toBe('model stream failed: AI SDK model local.chat/m: the model endpoint answered HTTP 503: The engine is overloaded, after 1 retry')
    expect(api.bodies).toHaveLength(2)
  })

  it('a 400 is not retried, and a key the provider echoes is masked', async () => {
    const api = await serve([(_, __, res) => httpError(res, 400, 'Bad request from key sk-live-0123456789abcdef')])
    const result = await delegate(hostFor(transport, api.url))
    expect(result.diagnostic).toBe('model stream failed: AI SDK model local.chat/m: the model endpoint answered HTTP 400: Bad request from key [redacted]')
    expect(api.bodies).toHaveLength(1)
  })

  it('an endpoint nobody listens on names its address and the cause', async () => {
    const url = await deadEndpoint()
    const result = await delegate(hostFor(transport, url, { maxRetries: 0 }))
    expect(result.diagnostic).toBe(`model stream failed: AI SDK model local.chat/m: could not reach the model endpoint ${url}/chat/completions: ECONNREFUSED`)
  })

  it('a stream cut after a chunk reached the child is reported as cut and never sent again', async () => {
    let cut!: (res: ServerResponse) => void
    let open!: ServerResponse
    const opened = new Promise<void>((resolve) => {
      cut = (res) => {
        open = res
        resolve()
      }
    })
    const api = await serve([(_, __, res) => (sse(res, [textChunk('The answer is')], false), cut(res))])
    const host = hostFor(transport, api.url)
    const result = await delegate(host, (run) => {
      void opened
        .then(() => eventOf(run, 'assistant/chunk'))
        .then(() => open.socket!.destroy())
    })
    expect(result).toMatchObject({ stopReason: 'error', output: [{ type: 'text', text: 'The answer is' }] })
    expect(result.diagnostic).toMatch(/^model stream failed: AI SDK model local\.chat\/m: the model endpoint's stream was cut after part of the answer had reached the child \(.+\), so the request was not retried$/)
    expect(api.bodies).toHaveLength(1)
  })

  it('an endpoint that never answers is abandoned after timeoutMs, and retried', async () => {
    const api = await serve([() => {}, () => {}])
    const result = await delegate(hostFor(transport, api.url, { timeoutMs: 200, maxRetries: 1 }))
    expect(result.diagnostic).toBe('model stream failed: the model endpoint did not answer within 200 ms (timeoutMs), after 1 retry')
    expect(api.bodies).toHaveLength(2)
  })

  it('maxConcurrency bounds the requests in flight across children: the next waits for a slot', async () => {
    let active = 0
    let most = 0
    const slow: Handler = (body, req, res) => {
      most = Math.max(most, ++active)
      setTimeout(() => {
        active--
        answer(body, req, res)
      }, 60)
    }
    const api = await serve([slow, slow, slow])
    const host = hostFor(transport, api.url, { maxConcurrency: 1 })
    const results = await Promise.all([delegate(host), delegate(host), delegate(host)])
    expect(results.map((result) => result.stopReason)).toEqual(['completed', 'completed', 'completed'])
    expect(most).toBe(1)
  })
})

describe('fromLanguageModel options', () => {
  it('are checked up front, each error naming the option', () => {
    const model = createOpenAICompatible({ name: 'local', baseURL: 'http://127.0.0.1/v1' }).chatModel('m')
    expect(() => fromLanguageModel(model, { maxRetries: -1 })).toThrow('fromLanguageModel maxRetries must be a whole number >= 0')
    expect(() => fromLanguageModel(model, { maxConcurrency: 0 })).toThrow('fromLanguageModel maxConcurrency must be a whole number >= 1')
    expect(() => fromLanguageModel(model, { timeoutMs: 0 })).toThrow('fromLanguageModel timeoutMs must be a whole number of milliseconds from 1 to 2147483647')
  })
})
