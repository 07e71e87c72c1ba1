import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Two worker nodes on Redis for the BullMQ transport's runs of the contract suite (skipped without Redis).
    globalSetup: ['test/support/global-nodes.ts'],
    // Tests wait for events, never for time (test/README.md); these bounds only stop a hung test.
    // Generous, because a loaded two-core machine is slow, not stuck.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Three files at a time on two cores: much of a test's time is waiting (on a runner's start, a
    // retry's backoff, a silence limit, a node process), and with two files a core sat idle a
    // fifth of the run (vitest's default is cores - 1, one file at a time on two cores).
    maxWorkers: 3,
  },
})
