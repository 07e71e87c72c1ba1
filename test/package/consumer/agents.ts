// The README's agent module, written in TypeScript: the tool's arguments are inferred.
import { defineAgentModule, defineTool } from 'subagent-worker'
import { z } from 'zod'

export default defineAgentModule({
  tools: [
    defineTool({
      name: 'measure',
      description: 'Counts words.',
      parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
      execute: ({ text }) => text.split(' ').length,
    }),
    defineTool({
      name: 'repeat',
      description: 'Repeats a word.',
      parameters: z.object({ word: z.string(), times: z.number().int() }),
      // @ts-expect-error `times` is a number: a typo'd argument name is a compile error
      execute: ({ word, time }) => word.repeat(time),
    }),
  ],
  hooks: { beforeStep: () => 'enter', afterTool: (_call, result) => result },
})
