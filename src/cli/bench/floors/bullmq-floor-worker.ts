/**
 * The BullMQ floor's worker: a process of its own, like a worker node, with nothing of the library
 * loaded. A BullMQ Worker on the floor's queue (the node's settings: a shared connection for the
 * jobs, another that publishes, the same concurrency) whose processor publishes the job's id on
 * the reply channel the job names and returns, so the job completes and leaves nothing behind.
 *
 *   node bullmq-floor-worker.js <redis URL> <queue> <concurrency>
 *
 * Prints `ready` once it takes jobs; stops on SIGTERM or SIGINT.
 */
import { Worker, type Job } from 'bullmq'
import { Redis } from 'ioredis'

/** What the floor's adder puts in a job: where to answer, and what. */
export interface FloorJob {
  reply: string
  id: string
}

const [url, queue, concurrency] = process.argv.slice(2)
if (url === undefined || queue === undefined || !/^\d+$/.test(concurrency ?? '')) {
  process.stderr.write('usage: bullmq-floor-worker.js <redis URL> <queue> <concurrency>\n')
  process.exit(2)
}

const publisher = new Redis(url)
const connection = new Redis(url, { maxRetriesPerRequest: null })
for (const client of [publisher, connection]) client.on('error', (error: Error) => process.stderr.write(`bullmq floor worker: ${error.message}\n`))
const worker = new Worker(
  queue,
  async (job: Job<FloorJob>) => {
    await publisher.publish(job.data.reply, job.data.id)
  },
  { connection, concurrency: Number(concurrency), maxStalledCount: 0 },
)
worker.on('error', (error: Error) => process.stderr.write(`bullmq floor worker: ${error.message}\n`))
await worker.waitUntilReady()
process.stdout.write('ready\n')

const stop = () => {
  process.off('SIGTERM', stop)
  process.off('SIGINT', stop)
  void worker
    .close()
    .then(() => Promise.all([publisher.quit(), connection.quit()]))
    .finally(() => process.exit(0))
}
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
