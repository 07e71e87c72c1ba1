/**
 * vitest globalSetup: two worker nodes on a queue of this run's own, shared by every file that
 * runs the contract suite on the BullMQ transport. Without Redis nothing starts and those tests
 * skip; with CI set, a missing Redis fails the run instead.
 */
import { randomBytes } from 'node:crypto'
import type { TestProject } from 'vitest/node'
import { startTestNode, type TestNode } from './nodes.js'
import { NO_REDIS, REDIS_URL, redisReachable } from './redis.js'

declare module 'vitest' {
  export interface ProvidedContext {
    /** The queue the shared nodes serve; absent when no Redis is reachable. */
    bullmq: { redis: string; queue: string } | undefined
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  if (!(await redisReachable())) {
    if (process.env.CI) throw new Error(`CI is set, so the BullMQ tests must run, but there is ${NO_REDIS}`)
    process.stderr.write(`\n${NO_REDIS}\n\n`)
    project.provide('bullmq', undefined)
    return async () => {}
  }
  const queue = `test-${process.pid}-${randomBytes(3).toString('hex')}`
  const nodes: TestNode[] = await Promise.all([startTestNode({ redis: REDIS_URL, queue }), startTestNode({ redis: REDIS_URL, queue })])
  project.provide('bullmq', { redis: REDIS_URL, queue })
  return async () => {
    await Promise.all(nodes.map((node) => node.stop()))
  }
}
