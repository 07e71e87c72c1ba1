/** What a failed model call says and when it is worth another attempt, shared by both model adapters. */
import { describe, expect, it } from 'vitest'
import { isRetryableStatus, lostConnection, networkCauseOf, providerMessage, retryAfterOf } from '../../dist/agent/models/endpoint-failure.js'

const headers = (values: Record<string, string>) => (name: string) => values[name]

describe('endpoint failures', () => {
  it('retries a timeout, a conflict, a rate limit and a server error, nothing else', () => {
    expect([400, 401, 404, 408, 409, 422, 429, 500, 503].filter(isRetryableStatus)).toEqual([408, 409, 429, 500, 503])
  })

  it('reads retry-after-ms, retry-after in seconds or as a date, and ignores a wait over a minute', () => {
    expect(retryAfterOf(headers({ 'retry-after-ms': '250', 'retry-after': '9' }))).toBe(250)
    expect(retryAfterOf(headers({ 'retry-after': '2' }))).toBe(2000)
    const soon = retryAfterOf(headers({ 'retry-after': new Date(Date.now() + 30_000).toUTCString() }))!
    expect(soon).toBeGreaterThan(25_000)
    expect(soon).toBeLessThanOrEqual(30_000)
    expect(retryAfterOf(headers({ 'retry-after': '3600' }))).toBeUndefined()
    expect(retryAfterOf(headers({}))).toBeUndefined()
  })

  it("finds the network code under wrappers, but never Node's own ERR_ codes", () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' })
    expect(networkCauseOf(new Error('Connection error.', { cause: new TypeError('fetch failed', { cause: refused }) }))).toEqual({ code: 'ECONNREFUSED', text: 'ECONNREFUSED' })
    const closed = Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' })
    expect(networkCauseOf(new TypeError('terminated', { cause: closed }))).toEqual({ code: 'UND_ERR_SOCKET', text: 'UND_ERR_SOCKET: other side closed' })
    expect(networkCauseOf(Object.assign(new TypeError('bad argument'), { code: 'ERR_INVALID_ARG_TYPE' }))).toBeUndefined()
  })

  it('says when a connection was lost: never opened, closed before an answer, or cut mid-answer', () => {
    const url = 'http://127.0.0.1:9/v1'
    expect(lostConnection(url, { code: 'ECONNREFUSED', text: 'ECONNREFUSED' }, false)).toBe('could not reach the model endpoint http://127.0.0.1:9/v1: ECONNREFUSED')
    expect(lostConnection(url, { code: 'ECONNRESET', text: 'ECONNRESET' }, false)).toBe('the model endpoint http://127.0.0.1:9/v1 closed the connection before answering (ECONNRESET)')
    expect(lostConnection(url, { code: 'ECONNRESET', text: 'ECONNRESET' }, true)).toBe(
      "the model endpoint's stream was cut after part of the answer had reached the child (ECONNRESET), so the request was not retried",
    )
  })

  it("masks what looks like a key in a provider's message, and shortens a long one", () => {
    expect(providerMessage('Incorrect API key provided: sk-proj-abcdef123456')).toBe('Incorrect API key provided: [redacted]')
    expect(providerMessage(`token ${'a1'.repeat(20)} rejected`)).toBe('token [redacted] rejected')
    expect(providerMessage('x'.repeat(400))).toBe(`${'x'.repeat(300)}...`)
    expect(providerMessage(undefined)).toBeUndefined()
  })
})
