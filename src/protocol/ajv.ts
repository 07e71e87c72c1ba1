/**
 * Ajv, from the build's one-file copy of the package (scripts/bundle-ajv.mjs). Loading Ajv's
 * own files one by one took every new runner thread or process about 40 ms of its start, and
 * the protocol's validators and every tool's schema need it there. The path holds from this
 * module's build output (dist/protocol/) and from the runner's bundle (dist/runner/) alike.
 */
import { createRequire } from 'node:module'
import type * as AjvPackage from 'ajv'

export const { Ajv } = createRequire(import.meta.url)('../protocol/ajv.cjs') as typeof AjvPackage
