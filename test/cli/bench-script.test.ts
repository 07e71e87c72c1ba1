/**
 * The bench's scripted model serves many children at once: each child must run the steps its
 * scenario names, in order (S4: a tool call, then the answer; S5: a burn, then the answer),
 * however their requests interleave on the one model.
 */
import { expect, it } from 'vitest'
import { textResponse, toolCallResponse, type ModelRequest } from 'subagent-worker'
import { benchHost, delegate, useScript } from '../../dist/cli/bench/harness.js'

/** The text of a request's first user message: the bench gives each child a prompt of its own. */
function promptOf(request: ModelRequest): string {
  const first = request.messages[0]
  if (first?.role !== 'user') throw new Error('a request without its prompt')
  return JSON.stringify(first.content)
}

it.each([
  ['answers at once', [toolCallResponse('burn-1', 'burn', { iterations: 0 }), textResponse('done')]],
  ['after a delay', [{ delayMs: 1, chunks: toolCallResponse('burn-1', 'burn', { iterations: 0 }) }, { delayMs: 1, chunks: textResponse('done') }]],
] as const)('every child of a batch started at once runs its own two steps, one tool call each, when the model %s', async (_, steps) => {
  const bench = benchHost('inline')
  try {
    const children = 6
    const script = useScript(bench, children, steps)
    const results = await Promise.all(Array.from({ length: children }, () => delegate(bench)))
    script.done()
    const byChild = new Map<string, ModelRequest[]>()
    for (const request of script.model.requests) {
      const prompt = promptOf(request)
      byChild.set(prompt, [...(byChild.get(prompt) ?? []), request])
    }
    expect(byChild.size).toBe(children)
    for (const requests of byChild.values()) {
      expect(requests.map((request) => request.messages.map((message) => message.role))).toEqual([['user'], ['user', 'assistant', 'tool']])
    }
    for (const result of results) expect(result.output).toEqual([{ type: 'text', text: 'done' }])
  } finally {
    await bench.host.close()
  }
})
