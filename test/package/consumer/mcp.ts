// The README's MCP snippet, verbatim (the tarball test checks it still is): compiled, not run.
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { createHost, OpenAICompatibleModel } from 'subagent-worker'
import { mcpServer, mcpTools } from 'subagent-worker/mcp'

const host = createHost({ isolation: 'process' })
host.models.register('openai', new OpenAICompatibleModel({ baseUrl: 'https://api.openai.com/v1', apiKey: process.env.OPENAI_API_KEY }))

// An MCP server's tools for the children, as host tools.
const github = new Client({ name: 'my-host', version: '1.0.0' })
await github.connect(new StdioClientTransport({ command: 'npx', args: ['-y', '@modelcontextprotocol/server-github'] }))
for (const tool of await mcpTools(github, { prefix: 'github_' })) host.tools.register(tool)

// The subagent tool as an MCP server, on this process's stdio.
const server = mcpServer(host, { provider: 'spawn', agentOptions: { provider: 'openai', model: 'gpt-5-mini' }, toolFilter: { deny: ['github_delete_file'] } })
server.onclose = () => void Promise.all([github.close(), host.close()])
await server.connect(new StdioServerTransport())
