/**
 * The OpenAI-compatible model against a real HTTP server on 127.0.0.1 (no mock of the client),
 * as children on every transport would use it: registered on the host, reached over the RPC.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { createHost, defineTool, OpenAICompatibleModel, type Host, type OpenAICompatibleOptions } from 'subagent-worker'
import { hostOptions, TRANSPORTS } from '../support/harness.js'
import { deadEndpoint } from '../support/model-server.js'
import { eventOf } from '../support/driver-helpers.js'

type Handler = (body: Record<string, unknown>, req: IncomingMessage, res: ServerResponse) => void
const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function server(handlers: Handler[]): Promise<{ url: string; bodies: Array<Record<string, unknown>>; headers: IncomingMessage['headers'][] }> {
  const bodies: Array<Record<string, unknown>> = []
  const headers: IncomingMessage['headers'][] = []
  const http = createServer((req, res) => {
    let raw = ''
    req.on('data', (chunk) => (raw += chunk))
    req.on('end', () => {
      const body = JSON.parse(raw) as Record<string, unknown>
      bodies.push(body)
      headers.push(req.headers)
      const handler = handlers[bodies.length - 1]
      if (!handler) {
        res.writeHead(500).end('no handler')
        return
      }
      handler(body, req, res)
    })
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  cleanups.push(() => new Promise((resolve) => http.close(() => resolve())))
  cleanups.push(async () => http.closeAllConnections())
  return { url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/v1`, bodies, headers }
}

function sse(res: ServerResponse, chunks: object[], done = true): void {
  res.writeHead(200, { 'content-type': 'text/event-stream' })
  for (const chunk of chunks) res.write(`data: ${JSON.stringify(chunk)}\n\n`)
  if (done) res.end('data: [DONE]\n\n')
}

const text = (content: string, finish: string | null = null) => ({ choices: [{ delta: { content }, finish_reason: finish }] })

function hostWith(transport: (typeof TRANSPORTS)[number], url: string, options: Partial<OpenAICompatibleOptions> = {}): Host {
  const host = createHost(hostOptions(transport))
  cleanups.push(() => host.close())
  host.models.register('openai', new OpenAICompatibleModel({ baseUrl: url, apiKey: 'sk-test-key-0123456789', ...options }))
  return host
}

/** One child's whole run against the server: its result, and its events as the host saw them. */
async function delegate(host: Host, prompt = 'go') {
  const parent = host.createAgent({ options: { provider: 'openai', model: 'gpt-test', maxTokens: 32 } })
  const run = await host.spawn.start({ prompt, parent, signal: new AbortController().signal })
  const result = await run.result
  const events = host.agents.get(run.id)!.session.events
  await run.dispose()
  return { result, events }
}

describe.each(TRANSPORTS)('OpenAI-compatible model over HTTP [%s]', (transport) => {
  it('streams text and usage into the child, sending the system prompt, the key and maxTokens', async () => {
    const api = await server([(_, __, res) => sse(res, [text('Hello'), text(' there', 'stop'), { choices: [], usage: { prompt_tokens: 12, completion_tokens: 3 } }])])
    const host = hostWith(transport, api.url)
    const parent = host.createAgent({ options: { provider: 'openai', model: 'gpt-test', maxTokens: 64 } })
    const run = await host.spawn.start({ prompt: 'Say hello', parent, signal: new AbortController().signal })
    expect(await run.result).toEqual({ output: [{ type: 'text', text: 'Hello there' }], usage: { inputTokens: 12, outputTokens: 3 }, totalUsage: { inputTokens: 12, outputTokens: 3 }, stopReason: 'completed' })
    const message = host.agents.get(run.id)!.session.events.find((e) => e.type === 'assistant/message')!
    expect(message.data).toEqual({ content: [{ type: 'text', text: 'Hello there' }], usage: { inputTokens: 12, outputTokens: 3 } })
    await run.dispose()
    expect(api.headers[0]!.authorization).toBe('Bearer sk-test-key-0123456789')
    expect(api.bodies[0]).toMatchObject({ model: 'gpt-test', max_tokens: 64, stream: true })
    const messages = api.bodies[0]!.messages as Array<{ role: string; content: string }>
    expect(messages[0]!.role).toBe('system')
    expect(messages[1]).toEqual({ role: 'user', content: 'Say hello' })
  })

  it('assembles a tool call streamed in pieces, runs it, and sends the result back', async () => {
    const api = await server([
      (_, __, res) =>
        sse(res, [
          { choices: [{ delta: { tool_calls: [{ index: 0, id: 'call_1', function: { name: 'add', arguments: '{"a":' } }] } }] },
          { choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: '2,"b":3}' } }] }, finish_reason: 'tool_calls' }] },
        ]),
      (_, __, res) => sse(res, [text('5', 'stop')]),
    ])
    const host = hostWith(transport, api.url)
    host.tools.register(
      defineTool<{ a: number; b: number }>({
        name: 'add',
        description: 'Adds.',
        parameters: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] },
        execute: ({ a, b }) => a + b,
      }),
    )
    const parent = host.createAgent({ options: { provider: 'openai', model: 'gpt-test' } })
    const run = await host.spawn.start({ prompt: 'add 2 and 3', parent, signal: new AbortController().signal })
    expect((await run.result).output).toEqual([{ type: 'text', text: '5' }])
    await run.dispose()
    expect((api.bodies[0]!.tools as Array<{ function: { name: string } }>).map((t) => t.function.name)).toEqual(['add'])
    const second = api.bodies[1]!.messages as Array<Record<string, unknown>>
    expect(second.slice(-2)).toEqual([
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'add', arguments: '{"a":2,"b":3}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '5' },
    ])
  })

  it('maps finish reasons: length is max-tokens, content_filter is a refusal', async () => {
    const api = await server([(_, __, res) => sse(res, [text('cut', 'length')]), (_, __, res) => sse(res, [text('', 'content_filter')])])
    const host = hostWith(transport, api.url)
    const parent = host.createAgent({ options: { provider: 'openai', model: 'gpt-test' } })
    const first = await host.spawn.start({ prompt: 'long', parent, signal: new AbortController().signal })
    expect((await first.result).stopReason).toBe('max-tokens')
    const second = await host.spawn.start({ prompt: 'bad', parent, signal: new AbortController().signal })
    expect((await second.result).stopReason).toBe('refusal')
    await Promise.all([first.dispose(), second.dispose()])
  })

  it('a refusal streamed in its own deltas is a refusal even when the finish says stop', async () => {
    const api = await server([
      (_, __, res) =>
        sse(res, [{ choices: [{ delta: { refusal: "I can't help with that." }, finish_reason: null }] }, { choices: [{ delta: {}, finish_reason: 'stop' }] }]),
    ])
    const host = hostWith(transport, api.url)
    const parent = host.createAgent({ options: { provider: 'openai', model: 'gpt-test' } })
    const run = await host.spawn.start({ prompt: 'bad', parent, signal: new AbortController().signal })
    expect(await run.result).toMatchObject({ stopReason: 'refusal', output: [{ type: 'text', text: "I can't help with that." }] })
    await run.dispose()
  })

  it('an abort closes the HTTP request and settles the child aborted with the streamed text', async () => {
    let closed!: () => void
    const requestClosed = new Promise<void>((resolve) => (closed = resolve))
    const api = await server([
      (_, req, res) => {
        sse(res, [text('partial answer')], false)
        res.on('close', () => closed())
      },
    ])
    const host = hostWith(transport, api.url)
    const parent = host.createAgent({ options: { provider: 'openai', model: 'gpt-test' } })
    const controller = new AbortController()
    const run = await host.spawn.start({ prompt: 'go on forever', parent, signal: controller.signal })
    await eventOf(run, 'assistant/chunk')
    controller.abort()
    expect(await run.result).toEqual({ output: [{ type: 'text', text: 'partial answer' }], stopReason: 'aborted' })
    await requestClosed
    await run.dispose()
  })

  it('an HTTP error settles the child error, with the key redacted from the diagnostic', async () => {
    const api = await server([(_, __, res) => res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"Incorrect API key provided: sk-test-key-0123456789"}')])
    const host = hostWith(transport, api.url)
    const parent = host.createAgent({ options: { provider: 'openai', model: 'gpt-test' } })
    const run = await host.spawn.start({ prompt: 'x', parent, signal: new AbortController().signal })
    const { stopReason, diagnostic } = await run.result
    expect(stopReason).toBe('error')
    expect(diagnostic).toContain('HTTP 401')
    expect(diagnostic).not.toContain('sk-test-key-0123456789')
    await run.dispose()
  })

  it('the key and header values this model sends are blanked wherever an error echoes them, however they look', async () => {
    const echo = (_: unknown, req: IncomingMessage, res: ServerResponse) =>
      res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: `not valid: ${req.headers.authorization} and ${req.headers['x-tenant-secret']}` } }))
    const api = await server([echo])
    const host = hostWith(transport, api.url, { apiKey: 'correct-horse-battery-staple', headers: { 'x-tenant-secret': 'tenant horse battery' }, maxRetries: 0 })
    const { result } = await delegate(host)
    expect(result).toMatchObject({ stopReason: 'error', diagnostic: 'model stream failed: the model endpoint answered HTTP 401: not valid: Bearer [redacted] and [redacted]' })
  })

  it('an error sent inside a 200 stream ends the child error, naming the error, never completed', async () => {
    const api = await server([
      (_, __, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        res.write(`data: ${JSON.stringify(text('Hel'))}\n\n`)
        res.end(`data: ${JSON.stringify({ error: { message: 'Rate limit reached for sk-test-key-0123456789', type: 'rate_limit_error', code: 'rate_limit_exceeded' } })}\n\n`)
      },
    ])
    const { result } = await delegate(hostWith(transport, api.url))
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toBe('model stream failed: the model endpoint sent an error inside its stream: Rate limit reached for [redacted] (rate_limit_error, rate_limit_exceeded)')
    expect(result.diagnostic).not.toContain('sk-test-key')
    expect(result.output).toEqual([{ type: 'text', text: 'Hel' }])
  })

  it('a stream cut off before its finish_reason ends the child error with the partial text, never completed', async () => {
    const api = await server([
      (_, __, res) => {
        sse(res, [text('The answer is'), text(' partly')], false)
        res.end()
      },
    ])
    const { result } = await delegate(hostWith(transport, api.url))
    expect(result).toEqual({
      output: [{ type: 'text', text: 'The answer is partly' }],
      stopReason: 'error',
      diagnostic: expect.stringContaining('stream ended before the model finished (no finish_reason)'),
    })
  })

  it('events separated by bare carriage returns (valid SSE) are read one by one', async () => {
    const api = await server([
      (_, __, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        for (const chunk of [text('one '), text('two', 'stop')]) res.write(`data: ${JSON.stringify(chunk)}\r\r`)
        res.end('data: [DONE]\r\r')
      },
    ])
    const { result } = await delegate(hostWith(transport, api.url))
    expect(result).toEqual({ output: [{ type: 'text', text: 'one two' }], stopReason: 'completed' })
  })

  it('a 429 is retried after the retry-after the server asked for, then the answer streams', async () => {
    const at: number[] = []
    const api = await server([
      (_, __, res) => {
        at.push(performance.now())
        res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '1' }).end('{"error":{"type":"rate_limit_error"}}')
      },
      (_, __, res) => {
        at.push(performance.now())
        sse(res, [text('after the wait', 'stop')])
      },
    ])
    const { result } = await delegate(hostWith(transport, api.url))
    expect(result).toEqual({ output: [{ type: 'text', text: 'after the wait' }], stopReason: 'completed' })
    expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(900)
  })

  it('an HTTP error that is not retried, or still failing after the retries, names its status and type', async () => {
    const api = await server([(_, __, res) => res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"The model gpt-test does not exist","type":"invalid_request_error","code":"model_not_found"}}')])
    const { result } = await delegate(hostWith(transport, api.url, { maxRetries: 0 }))
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toBe('model stream failed: the model endpoint answered HTTP 404: The model gpt-test does not exist (invalid_request_error, model_not_found)')
  })

  it('an endpoint that goes silent mid-stream is abandoned after timeoutMs, and the child ends error saying so', async () => {
    let closed!: () => void
    const requestClosed = new Promise<void>((resolve) => (closed = resolve))
    const api = await server([
      (_, __, res) => {
        sse(res, [text('started')], false)
        res.on('close', () => closed())
      },
    ])
    const { result } = await delegate(hostWith(transport, api.url, { timeoutMs: 300 }))
    expect(result).toEqual({ output: [{ type: 'text', text: 'started' }], stopReason: 'error', diagnostic: expect.stringContaining('sent nothing for 300 ms (timeoutMs)') })
    await requestClosed
  })

  it('an endpoint that never answers times out after its retries', async () => {
    const api = await server([() => {}, () => {}])
    const { result } = await delegate(hostWith(transport, api.url, { timeoutMs: 200, maxRetries: 1 }))
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toBe('model stream failed: the model endpoint did not answer within 200 ms (timeoutMs), after 1 retry')
    expect(api.bodies).toHaveLength(2)
  })

  it('an endpoint nobody listens on is a connection failure naming its address and cause', async () => {
    const url = await deadEndpoint()
    const { result } = await delegate(hostWith(transport, url, { maxRetries: 0 }))
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toBe(`model stream failed: could not reach the model endpoint ${url}: ECONNREFUSED`)
  })

  it('a connection closed before any answer is retried, and said to be closed, not unreachable', async () => {
    // destroy() drops what was written: the client reads no byte of an answer.
    const drop: Handler = (_, __, res) => (sse(res, [text('never seen')], false), res.socket!.destroy())
    const api = await server([drop, drop])
    const { result } = await delegate(hostWith(transport, api.url, { maxRetries: 1 }))
    expect(result.diagnostic).toBe(`model stream failed: the model endpoint ${api.url} closed the connection before answering (UND_ERR_SOCKET: other side closed), after 1 retry`)
    expect(api.bodies).toHaveLength(2)
  })

  it('a stream cut after a chunk reached the child is reported as cut and never sent again', async () => {
    let opened!: (res: ServerResponse) => void
    const open = new Promise<ServerResponse>((resolve) => (opened = resolve))
    const api = await server([(_, __, res) => (sse(res, [text('The answer is')], false), opened(res))])
    const host = hostWith(transport, api.url)
    const parent = host.createAgent({ options: { provider: 'openai', model: 'gpt-test' } })
    const run = await host.spawn.start({ prompt: 'go', parent, signal: new AbortController().signal })
    const res = await open
    await eventOf(run, 'assistant/chunk')
    res.socket!.destroy()
    const result = await run.result
    await run.dispose()
    expect(result).toEqual({
      output: [{ type: 'text', text: 'The answer is' }],
      stopReason: 'error',
      diagnostic: "model stream failed: the model endpoint's stream was cut after part of the answer had reached the child (UND_ERR_SOCKET: other side closed), so the request was not retried",
    })
    expect(api.bodies).toHaveLength(1)
  })

  it('a 5xx is retried with backoff, and still failing names its status and the provider message', async () => {
    const down: Handler = (_, __, res) => res.writeHead(502, { 'content-type': 'application/json' }).end('{"error":{"message":"Bad gateway upstream"}}')
    const api = await server([down, down, down])
    const { result } = await delegate(hostWith(transport, api.url))
    expect(result.diagnostic).toBe('model stream failed: the model endpoint answered HTTP 502: Bad gateway upstream, after 2 retries')
    expect(api.bodies).toHaveLength(3)
  })

  it('body fields are merged into every request, and maxTokensField names the token cap', async () => {
    const api = await server([(_, __, res) => sse(res, [text('ok', 'stop')])])
    const host = hostWith(transport, api.url, { body: { temperature: 0.2, tool_choice: 'none', model: 'overridden?' }, maxTokensField: 'max_completion_tokens' })
    await delegate(host)
    expect(api.bodies[0]).toMatchObject({ temperature: 0.2, tool_choice: 'none', model: 'gpt-test', max_completion_tokens: 32, stream: true })
    expect(api.bodies[0]).not.toHaveProperty('max_tokens')
  })

  it('maxConcurrency bounds the requests in flight across children: the next waits for a slot', async () => {
    let active = 0
    let most = 0
    const answer = (_: unknown, __: unknown, res: ServerResponse) => {
      active++
      most = Math.max(most, active)
      setTimeout(() => {
        active--
        sse(res, [text('done', 'stop')])
      }, 60)
    }
    const api = await server([answer, answer, answer])
    const host = hostWith(transport, api.url, { maxConcurrency: 1 })
    const results = await Promise.all([delegate(host), delegate(host), delegate(host)])
    expect(results.map(({ result }) => result.stopReason)).toEqual(['completed', 'completed', 'completed'])
    expect(most).toBe(1)
  })

  it('without an apiKey no Authorization header is sent, and OPENAI_API_KEY is never read', async () => {
    const saved = process.env.OPENAI_API_KEY
    process.env.OPENAI_API_KEY = 'sk-from-the-environment-0123456789'
    try {
      const api = await server([(_, __, res) => sse(res, [text('ok', 'stop')])])
      const host = createHost(hostOptions(transport))
      cleanups.push(() => host.close())
      host.models.register('openai', new OpenAICompatibleModel({ baseUrl: api.url }))
      await delegate(host)
      expect(api.headers[0]!.authorization).toBeUndefined()
    } finally {
      if (saved === undefined) delete process.env.OPENAI_API_KEY
      else process.env.OPENAI_API_KEY = saved
    }
  })
})

describe('OpenAICompatibleModel as a Model', () => {
  it("a caller's abort mid-stream ends its stream with the caller's reason, never a quiet end", async () => {
    const api = await server([(_, __, res) => sse(res, [text('partial answer')], false)])
    const model = new OpenAICompatibleModel({ baseUrl: api.url })
    const controller = new AbortController()
    const reason = { kind: 'mine' }
    const seen: unknown[] = []
    const reading = (async () => {
      for await (const chunk of model.stream({ model: 'gpt-test', messages: [{ role: 'user', content: [{ type: 'text', text: 'go' }] }], signal: controller.signal })) {
        seen.push(chunk)
        controller.abort(reason)
      }
    })()
    await expect(reading).rejects.toBe(reason)
    expect(seen).toEqual([{ type: 'text-delta', text: 'partial answer' }])
  })
})

describe('OpenAICompatibleModel options', () => {
  it('are checked up front, each error naming the option', () => {
    const make = (options: object) => () => new OpenAICompatibleModel({ baseUrl: 'http://127.0.0.1/v1', ...options } as OpenAICompatibleOptions)
    expect(() => new OpenAICompatibleModel({ baseUrl: 'ftp://x' })).toThrow(/baseUrl/)
    // fetch would refuse it on every request, quoting the password: refused here, without it.
    const credentialed = (() => {
      try {
        return new OpenAICompatibleModel({ baseUrl: 'https://user:s3cretPASS@example.test/v1' })
      } catch (error) {
        return error
      }
    })()
    expect(credentialed).toMatchObject({ code: 'ERR_SUBAGENT_ARGUMENT', message: 'OpenAICompatibleModel baseUrl must not carry credentials (user:password@): give the key as apiKey, or in headers' })
    expect(make({ maxRetries: -1 })).toThrow(/maxRetries/)
    expect(make({ timeoutMs: 0 })).toThrow(/timeoutMs/)
    expect(make({ timeoutMs: 2 ** 31 })).toThrow(/timeoutMs/)
    expect(make({ maxTokensField: 'max_output_tokens' })).toThrow(/maxTokensField/)
    expect(make({ maxConcurrency: 0 })).toThrow(/maxConcurrency/)
    expect(make({ body: [] })).toThrow(/body/)
    // An unset variable read with `?? ''` is the usual way here: the message says what to do.
    expect(make({ apiKey: '' })).toThrow('OpenAICompatibleModel apiKey must be a non-empty string when given: leave it out (undefined) to send no Authorization header')
  })
})
