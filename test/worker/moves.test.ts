/**
 * Thread-mates survive (CONTRACT.md §8) on a host's own runners, threads and processes: the
 * suite is test/support/moves.ts, shared with the BullMQ transport (test/bullmq/moves.test.ts).
 */
import { fileURLToPath } from 'node:url'
import { afterEach } from 'vitest'
import { POOLED } from '../support/harness.js'
import { describeMoves } from '../support/moves.js'
import { closeWorkerHosts, workerHost } from '../support/worker-host.js'

const FAULT_MODULE = fileURLToPath(new URL('../fixtures/fault-module.mjs', import.meta.url))
afterEach(closeWorkerHosts)

for (const isolation of POOLED) {
  describeMoves(`${isolation} transport`, async (script, options = {}) => workerHost(FAULT_MODULE, script, { isolation, ...options }), isolation === 'worker' ? 'terminated' : 'killed')
}
