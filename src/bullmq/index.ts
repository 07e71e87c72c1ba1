// subagent-worker/bullmq: children on worker nodes through BullMQ on Redis (`bullmq` 6 and `ioredis` installed). Re-exports only.
export { bullmqTransport, type BullmqTransportOptions } from './transport.js'
export { startNode, type NodeOptions, type WorkerNode } from './node.js'
export type { RedisConnection } from './redis.js'
