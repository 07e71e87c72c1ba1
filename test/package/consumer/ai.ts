// The AI SDK entry, as a project using `ai` imports it: zod schemas type the tool and its result.
import { createHost, ScriptedModel, toolCallResponse } from 'subagent-worker'
import { delegationTool } from 'subagent-worker/ai-sdk'
import { z } from 'zod'

const host = createHost({ isolation: 'inline' })
host.models.register('scripted', new ScriptedModel([toolCallResponse('s1', 'structured_output', { label: 'feature' })]))
const classify = delegationTool(host, { provider: 'spawn', agentOptions: { provider: 'scripted' }, outputSchema: z.object({ label: z.enum(['bug', 'feature']) }) })
const value = await classify.execute?.({ description: 'classify', prompt: 'Add dark mode.' }, { toolCallId: 't1', messages: [] })
await host.close()
console.log(JSON.stringify(value))
