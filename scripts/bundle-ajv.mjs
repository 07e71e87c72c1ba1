// Build step, after tsc: Ajv as one file, dist/protocol/ajv.cjs, which src/protocol/ajv.ts loads.
// Ajv is some 60 CommonJS files: resolving and loading them one by one took every new runner
// thread or process about 40 ms of its start, and one file takes about 15. The licences of the
// packages bundled are appended to the file.
import { appendFileSync, existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { build } from 'esbuild'

const outfile = new URL('../dist/protocol/ajv.cjs', import.meta.url).pathname
const { metafile } = await build({
  entryPoints: [createRequire(import.meta.url).resolve('ajv')],
  outfile,
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  metafile: true,
  logLevel: 'warning',
})

/** The folder of the package an input file belongs to. */
function packageOf(input) {
  const at = input.lastIndexOf('node_modules/') + 'node_modules/'.length
  const parts = input.slice(at).split('/')
  return input.slice(0, at) + parts.slice(0, parts[0].startsWith('@') ? 2 : 1).join('/')
}

function notice(folder) {
  const { name, version, license } = JSON.parse(readFileSync(join(folder, 'package.json'), 'utf8'))
  const file = ['LICENSE', 'LICENSE.md', 'LICENSE.txt'].map((name) => join(folder, name)).find(existsSync)
  const text = file ? readFileSync(file, 'utf8').trim().replaceAll('*/', '* /') : `${license}, as the package says.`
  return `${name}@${version} (${license}):\n\n${text}`
}

const folders = [...new Set(Object.keys(metafile.inputs).map(packageOf))].sort()
appendFileSync(outfile, `\n/*! The packages bundled above, and their licences.\n\n${folders.map(notice).join('\n\n')}\n*/\n`)
