/**
 * One MCP tool call of the `subagent` tool: the library's own tool over a provider that notes
 * the run it starts (for progress, and for the structured value) and adds the output schema.
 * The call itself (checks, waiting, disposal, failure texts) stays `createSubagentTool`'s.
 */
import { createSubagentTool, type Host, type JsonSchema, type SubagentProvider, type SubagentRun, type SubagentToolConfig } from '../index.js'

export type DelegationHost = Pick<Host, 'spawn' | 'fork' | 'jobs' | 'agents'>

export function providerOf(host: DelegationHost, config: SubagentToolConfig): SubagentProvider {
  return config.provider === 'spawn' ? host.spawn : config.provider === 'fork' ? host.fork : config.provider
}

/** A provider like `base` that adds `schema` to every start and tells `started` of each run. */
export function noting(base: SubagentProvider, schema: JsonSchema | undefined, started: (run: SubagentRun) => void): SubagentProvider {
  const withSchema = <R extends { outputSchema?: object }>(request: R): R => (schema === undefined ? request : { ...request, outputSchema: schema })
  return {
    name: base.name,
    capabilities: base.capabilities,
    inheritsParentContext: base.inheritsParentContext,
    async start(request) {
      const run = await base.start(withSchema(request))
      started(run)
      return run
    },
    run: (request) => base.run(withSchema(request)),
  }
}

/** The `subagent` tool for one call, whose runs `started` hears of. */
export function delegationCall(host: DelegationHost, config: SubagentToolConfig, schema: JsonSchema | undefined, started: (run: SubagentRun) => void) {
  return createSubagentTool(host, { ...config, provider: noting(providerOf(host, config), schema, started) })
}
