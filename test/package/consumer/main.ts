// A user's program against the packed tarball: the README's delegation in its one-call form, on
// every transport, with every public type it names. Prints what it got as one JSON line.
import { realpathSync } from 'node:fs'
import {
  createHost,
  ScriptedModel,
  textOf,
  textResponse,
  toolCallResponse,
  type SubagentArgs,
  type SubagentEndEvent,
  type SubagentResult,
  type ToolSchema,
  type TurnOutcome,
} from 'subagent-worker'
import { z } from 'zod'

const agentModule = new URL('./agents.js', import.meta.url)
const report: Record<string, unknown> = {}

// The agent module imports zod: a sandboxed child process must be let read it (this file runs
// from out/; in this test node_modules/zod is a link, so where it really is too).
const zod = new URL('../node_modules/zod', import.meta.url)
const sandbox = { fsRead: [zod, realpathSync(zod)] }

for (const isolation of ['inline', 'worker', 'process'] as const) {
  const host = createHost({ isolation, agentModule, ...(isolation === 'process' ? { sandbox } : {}) })
  const ends: SubagentEndEvent[] = []
  host.on('subagent/end', (event) => ends.push(event))
  host.models.register(
    'scripted',
    new ScriptedModel([
      textResponse('The answer is 42.'),
      toolCallResponse('c1', 'measure', { text: 'a b c' }),
      toolCallResponse('s1', 'structured_output', { label: 'bug', words: 3 }),
      textResponse('Hello.'),
    ]),
  )
  const parent = host.createAgent({ options: { provider: 'scripted', model: 'any' } })

  const answer: SubagentResult = await host.spawn.run({ prompt: 'What is the answer?', parent })

  const outputSchema = z.object({ label: z.enum(['bug', 'feature']), words: z.number() })
  const classified = await host.fork.run({ prompt: 'Classify it.', parent, outputSchema, label: 'classify' })
  const label: 'bug' | 'feature' | undefined = classified.structured?.label
  // @ts-expect-error `structured` is typed from the schema: it has no `title`
  void classified.structured?.title

  const turn: TurnOutcome = await parent.run('Hi')
  const args: SubagentArgs = { description: 'a task', prompt: 'do it' }
  // DESIGN.md types a tool's parameters as any object, as a caller's JSON Schema usually is.
  const parameters: object = { type: 'object' }
  const tool: ToolSchema = { name: 'measure', description: 'Counts words.', parameters }
  void tool
  await parent.dispose()
  await host.close()

  report[isolation] = {
    answer: textOf(answer.output),
    stopReason: answer.stopReason,
    label,
    words: classified.structured?.words,
    turn: textOf(turn.output),
    ends: ends.map((event) => ({ stopReason: event.stopReason, label: event.label ?? null, usage: event.usage ?? null })),
    args: Object.keys(args),
  }
}
console.log(JSON.stringify(report))
