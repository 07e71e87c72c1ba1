// subagent-worker/bullmq: children on worker nodes through BullMQ on Redis (`bullmq` 6 and `ioredis` installed). Re-exports only.
export { bullmqTransport, type BullmqTransportOptions } from './host.js'
export { startNode, type NodeOptions } from './node.js'
export type { WorkerNode } from '../remote/node.js'
export type { RedisConnection } from './redis.js'
