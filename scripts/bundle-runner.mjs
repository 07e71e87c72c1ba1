// Build step, last: the package as a runner loads it, a few files in dist/runner/ instead of the
// hundred or so modules tsc writes. A new runner thread or process spent most of its start
// resolving and loading those one by one (BENCHMARKS.md, "A runner's start: one bundle").
//
// The host starts each runner with the condition `subagent-worker-runner` (its entry is this
// bundle's), so that inside a runner every import of the package, the runner's own and an agent
// module's alike, resolves to these files (package.json `exports`): one copy of each class in the
// runner, whatever imports it. The host itself keeps tsc's files. Every package we depend on stays
// outside, but for Ajv, which comes from its own one-file build (bundle-ajv.mjs), found by a path
// that holds from dist/protocol/ and from here alike.
import { rmSync } from 'node:fs'
import { build } from 'esbuild'

const dist = (path) => new URL(`../dist/${path}`, import.meta.url).pathname

// A chunk's name is its content's hash: the last build's would stay beside this one's.
rmSync(dist('runner'), { recursive: true, force: true })

await build({
  entryPoints: {
    entry: dist('worker/entry.js'),
    'process-entry': dist('worker/process-entry.js'),
    index: dist('index.js'),
    'ai-sdk': dist('ai-sdk/index.js'),
    bullmq: dist('bullmq/index.js'),
    otel: dist('otel/index.js'),
    mcp: dist('mcp/index.js'),
  },
  outdir: dist('runner'),
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  packages: 'external',
  sourcemap: true,
  logLevel: 'warning',
})
