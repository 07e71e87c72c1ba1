// subagent-worker/mcp: the library as an MCP server, and MCP servers' tools as host tools. Re-exports only.
export { mcpServer, type McpServerConfig } from './server.js'
export { mcpTools, type McpToolsOptions, type McpToolClient } from './tools.js'
