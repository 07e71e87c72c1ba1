/**
 * The demo's agent module: every worker thread imports it, and so does the host. Its tools do
 * their work where the child runs, which is what makes a runaway or a crash containable.
 */
import { threadId } from 'node:worker_threads'
import { defineAgentModule, defineTool } from 'subagent-worker'

const none = { type: 'object', properties: {} }

export default defineAgentModule({
  tools: [
    defineTool<{ text: string }>({
      name: 'measure',
      description: 'Counts the words and sentences of a text, and reports the thread that did it.',
      parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
      execute({ text }) {
        // A little real CPU work, so the measurement is done by the worker and not faked.
        const end = performance.now() + 15
        while (performance.now() < end);
        return { words: text.split(/\s+/).filter(Boolean).length, sentences: text.split(/[.!?]+/).filter((s) => s.trim()).length, thread: threadId }
      },
    }),
    defineTool({
      name: 'runaway',
      description: 'Loops forever and never checks for cancellation.',
      parameters: none,
      execute() {
        for (;;);
      },
    }),
    defineTool({
      name: 'crash',
      description: 'Throws from a timer, killing its thread.',
      parameters: none,
      execute() {
        setTimeout(() => {
          throw new Error('corrupted state in the crashing tool')
        }, 20)
        return 'scheduled'
      },
    }),
  ],
})
