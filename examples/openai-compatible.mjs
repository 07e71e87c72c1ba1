// Real delegations against any OpenAI-compatible Chat Completions endpoint, on worker threads:
// three structured reviews in parallel, then a fork that answers from the parent's conversation.
//
//   npm run build
//   OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=sk-... OPENAI_MODEL=gpt-4.1-mini node examples/openai-compatible.mjs
//
// OPENAI_BASE_URL defaults to OpenAI's; OPENAI_API_KEY may be left out for a local server (Ollama,
// vLLM, llama.cpp: OPENAI_BASE_URL=http://127.0.0.1:11434/v1 OPENAI_MODEL=llama3.1).
import { createHost, OpenAICompatibleModel } from 'subagent-worker'

const { OPENAI_BASE_URL = 'https://api.openai.com/v1', OPENAI_API_KEY, OPENAI_MODEL } = process.env
if (!OPENAI_MODEL) {
  process.stderr.write('set OPENAI_MODEL (and OPENAI_BASE_URL, OPENAI_API_KEY as your endpoint needs)\n')
  process.exit(2)
}

const host = createHost({ isolation: 'worker' })
// Registered on the host: the key and the connections stay in the main thread, one limit for all.
host.models.register('llm', new OpenAICompatibleModel({ baseUrl: OPENAI_BASE_URL, apiKey: OPENAI_API_KEY, maxConcurrency: 4, timeoutMs: 60_000 }))
const parent = host.createAgent({ options: { provider: 'llm', model: OPENAI_MODEL, maxTokens: 512 } })

const review = {
  type: 'object',
  properties: { summary: { type: 'string' }, sentiment: { enum: ['positive', 'neutral', 'negative'] } },
  required: ['summary', 'sentiment'],
  additionalProperties: false,
}
const reviews = [
  'The pool kept up with a thousand children and never blocked the host. Superb.',
  'Setup took a minute; the docs answered every question I had.',
  'Crashed workers were contained, but the error messages could be friendlier.',
]

try {
  const results = await Promise.all(
    reviews.map((text, i) => host.spawn.run({ prompt: `Summarize this review in one sentence and rate its sentiment:\n${text}`, parent, signal: AbortSignal.timeout(120_000), label: `review-${i + 1}`, outputSchema: review })),
  )
  for (const [i, result] of results.entries()) {
    process.stdout.write(`review-${i + 1}: ${result.stopReason} ${result.structured ? JSON.stringify(result.structured) : (result.diagnostic ?? '')}\n`)
  }

  await parent.run('Remember this: the project codename is Bluebird. Reply with "noted".')
  const fork = await host.fork.run({ prompt: 'What is the project codename? One word.', parent, signal: AbortSignal.timeout(120_000) })
  process.stdout.write(`fork: ${fork.stopReason} ${fork.output.map((b) => (b.type === 'text' ? b.text : '')).join('') || (fork.diagnostic ?? '')}\n`)
} finally {
  await host.close()
}
