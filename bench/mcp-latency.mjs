// What MCP stdio adds to one delegation: the same foreground delegation on worker threads,
// called directly on a host in this process and through `subagent-worker mcp` over stdio,
// alternated in one run. Prints the medians. Run after `npm run build`: node bench/mcp-latency.mjs [rounds]
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { fileURLToPath } from 'node:url'
import { createHost } from '../dist/index.js'

const ROUNDS = Number(process.argv[2] ?? 50)
const WARMUP = 5
const MAIN = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url))

// The CLI's scripted demo model, reproduced: one answer, no network.
const demo = {
  async *stream() {
    yield { type: 'text-delta', text: 'scripted demo model answer' }
    yield { type: 'finish', reason: 'stop' }
  },
}

const host = createHost({ isolation: 'worker' })
host.models.register('demo', demo)
const parent = host.createAgent({ options: { provider: 'demo' } })
const client = new Client({ name: 'mcp-latency', version: '0.0.0' })
await client.connect(new StdioClientTransport({ command: process.execPath, args: [MAIN, 'mcp', '--isolation', 'worker'] }))

const direct = () => host.spawn.run({ prompt: 'one task', parent, label: 'bench' })
const viaMcp = () => client.callTool({ name: 'subagent', arguments: { description: 'bench', prompt: 'one task' } })

async function time(call) {
  const start = performance.now()
  await call()
  return performance.now() - start
}

const samples = { direct: [], mcp: [] }
for (let i = 0; i < WARMUP + ROUNDS; i++) {
  const d = await time(direct)
  const m = await time(viaMcp)
  if (i >= WARMUP) {
    samples.direct.push(d)
    samples.mcp.push(m)
  }
}
await client.close()
await host.close()

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const d = median(samples.direct)
const m = median(samples.mcp)
console.log(`one foreground delegation on worker threads, median of ${ROUNDS} each (after ${WARMUP} warm-up), alternated:`)
console.log(`  direct (host.spawn.run)        ${d.toFixed(2)} ms`)
console.log(`  through MCP stdio (callTool)   ${m.toFixed(2)} ms`)
console.log(`  added by MCP stdio             ${(m - d).toFixed(2)} ms`)
