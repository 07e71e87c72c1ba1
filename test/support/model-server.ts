/**
 * A real HTTP server on 127.0.0.1 standing in for a model endpoint: request N is answered by
 * handler N (a 500 when there is none), and every request received is counted, so a test can
 * say how often a request was sent.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export type Handler = (body: Record<string, unknown>, req: IncomingMessage, res: ServerResponse) => void

export interface ModelServer {
  /** The base URL, ending in /v1. */
  url: string
  /** Each request's JSON body, in the order received. */
  bodies: Array<Record<string, unknown>>
  close(): Promise<void>
}

export async function modelServer(handlers: Handler[]): Promise<ModelServer> {
  const bodies: Array<Record<string, unknown>> = []
  const http = createServer((req, res) => {
    let raw = ''
    req.on('data', (chunk) => (raw += chunk))
    req.on('end', () => {
      bodies.push(JSON.parse(raw) as Record<string, unknown>)
      const handler = handlers[bodies.length - 1]
      if (handler) handler(bodies[bodies.length - 1]!, req, res)
      else res.writeHead(500).end('no handler')
    })
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/v1`,
    bodies,
    close: () =>
      new Promise((resolve) => {
        http.closeAllConnections()
        http.close(() => resolve())
      }),
  }
}

/** A base URL on 127.0.0.1 that nobody listens on (a port just freed). */
export async function deadEndpoint(): Promise<string> {
  const gone = createServer()
  await new Promise<void>((resolve) => gone.listen(0, '127.0.0.1', resolve))
  const { port } = gone.address() as AddressInfo
  await new Promise((resolve) => gone.close(resolve))
  return `http://127.0.0.1:${port}/v1`
}

/** Starts an SSE answer and writes `chunks` as `data:` events; `[DONE]` ends it when `done`. */
export function sse(res: ServerResponse, chunks: object[], done = true): void {
  res.writeHead(200, { 'content-type': 'text/event-stream' })
  for (const chunk of chunks) res.write(`data: ${JSON.stringify(chunk)}\n\n`)
  if (done) res.end('data: [DONE]\n\n')
}

/** A Chat Completions chunk of text, with its finish reason when it is the last. */
export const textChunk = (content: string, finish: string | null = null) => ({ id: 'c', object: 'chat.completion.chunk', created: 0, model: 'm', choices: [{ index: 0, delta: { content }, finish_reason: finish }] })

/** Answers with an OpenAI-style error body. */
export function httpError(res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify({ error: { message, type: 'test_error', code: 'test_code' } }))
}
