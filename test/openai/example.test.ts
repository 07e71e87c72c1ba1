/**
 * examples/openai-compatible.mjs, run as a user would, against a loopback server that answers
 * like a model: structured reviews through structured_output, a parent turn, and a fork that
 * reads the parent's conversation. It keeps the README's example true.
 */
import { execFile } from 'node:child_process'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterEach, expect, it } from 'vitest'

const EXAMPLE = fileURLToPath(new URL('../../examples/openai-compatible.mjs', import.meta.url))
const close: Array<() => void> = []
afterEach(() => close.splice(0).forEach((done) => done()))

interface Request {
  messages: Array<{ role: string; content: string | null }>
  tools?: Array<{ function: { name: string } }>
}

/** Answers as a model would: the structured tool when it is offered, the codename when asked. */
function answer(body: Request): object[] {
  const text = (content: string) => [{ choices: [{ delta: { content }, finish_reason: 'stop' }] }]
  const last = body.messages.at(-1)!
  if (last.role === 'tool') return text('recorded')
  if (body.tools?.some((t) => t.function.name === 'structured_output')) {
    const args = JSON.stringify({ summary: 'A short summary.', sentiment: 'positive' })
    return [{ choices: [{ delta: { tool_calls: [{ index: 0, id: 'call_1', function: { name: 'structured_output', arguments: args } }] }, finish_reason: 'tool_calls' }] }]
  }
  if (String(last.content).includes('codename')) {
    const remembered = body.messages.some((m) => String(m.content).includes('Bluebird'))
    return text(remembered ? 'Bluebird' : 'unknown')
  }
  return text('noted')
}

it('the OpenAI-compatible example runs against any endpoint given by environment variables', async () => {
  const requests: Request[] = []
  const server = createServer((req, res) => {
    let raw = ''
    req.on('data', (chunk) => (raw += chunk))
    req.on('end', () => {
      const body = JSON.parse(raw) as Request
      requests.push(body)
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      for (const chunk of answer(body)) res.write(`data: ${JSON.stringify(chunk)}\n\n`)
      res.end('data: [DONE]\n\n')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  close.push(() => server.close())
  const { port } = server.address() as AddressInfo
  const env = { PATH: process.env.PATH ?? '', OPENAI_BASE_URL: `http://127.0.0.1:${port}/v1`, OPENAI_MODEL: 'test-model' }
  const { stdout } = await promisify(execFile)(process.execPath, [EXAMPLE], { env, timeout: 90_000 })
  expect(stdout).toBe(
    [
      ...[1, 2, 3].map((i) => `review-${i}: completed {"summary":"A short summary.","sentiment":"positive"}`),
      'fork: completed Bluebird',
      '',
    ].join('\n'),
  )
  expect(requests.every((r) => (r as unknown as { model: string }).model === 'test-model')).toBe(true)
}, 100_000)
