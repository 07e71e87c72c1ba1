/** Tools for background jobs: collect (`job_output`), stop (`job_kill`), list (`job_list`). Each agent sees only its own jobs. */
import { defineTool, ToolError, type ToolDefinition } from '../../agent/tools/tools.js'
import type { Host } from '../host/host.js'
import type { JobInfo } from '../driver/jobs.js'

export function createJobTools(host: Pick<Host, 'jobs'>): ToolDefinition[] {
  const { jobs } = host
  const owned = (id: string, owner: string): JobInfo => {
    const job = jobs.get(id)
    if (!job || job.owner !== owner) throw new ToolError(`unknown job "${id}": job_list shows your jobs`)
    return job
  }
  const describe = (job: JobInfo): string => {
    switch (job.status) {
      case 'running':
        return `job ${job.id} is running`
      // A completed or killed job's detail is what went wrong beside its outcome (its release
      // failed, the limit that stopped it): the model reads it too.
      case 'completed':
        return `job ${job.id} completed${job.detail ? ` (${job.detail})` : ''}:\n${job.output ?? ''}`
      case 'failed':
        return `job ${job.id} failed: ${job.detail ?? 'unknown'}`
      case 'killed': {
        const why = job.detail ?? (job.limit && `limits.${job.limit}`)
        return why ? `job ${job.id} was killed: ${why}` : `job ${job.id} was killed`
      }
    }
  }
  const jobId = { job_id: { type: 'string', description: 'The job id returned when the job started.' } }
  return [
    defineTool<{ job_id: string; wait?: boolean }>({
      name: 'job_output',
      description: 'Shows a background job: running, or its final output (completed), why it failed, or that it was killed.',
      parameters: {
        type: 'object',
        properties: { ...jobId, wait: { type: 'boolean', description: 'Wait until the job has finished (default false).' } },
        required: ['job_id'],
        additionalProperties: false,
      },
      async execute({ job_id, wait }, exec) {
        const job = owned(job_id, exec.agent.id)
        if (!wait || job.status !== 'running') return describe(job)
        // Waiting ends with the caller's turn, not only with the job.
        let stop = () => {}
        const cancelled = new Promise<never>((_, reject) => {
          stop = () => reject(exec.signal.reason)
          if (exec.signal.aborted) stop()
          else exec.signal.addEventListener('abort', stop, { once: true })
        })
        try {
          return describe(await Promise.race([jobs.wait(job_id), cancelled]))
        } finally {
          exec.signal.removeEventListener('abort', stop)
        }
      },
    }),
    defineTool<{ job_id: string }>({
      name: 'job_kill',
      description: 'Stops a running background job.',
      parameters: { type: 'object', properties: jobId, required: ['job_id'], additionalProperties: false },
      async execute({ job_id }, exec) {
        const job = owned(job_id, exec.agent.id)
        if (job.status !== 'running') return `job ${job_id} already finished: ${describe(job)}`
        return describe(await jobs.kill(job_id))
      },
    }),
    defineTool({
      name: 'job_list',
      description: 'Lists your background jobs and their status.',
      parameters: { type: 'object', properties: {}, additionalProperties: false },
      execute(_args, exec) {
        const mine = jobs.list(exec.agent.id)
        return mine.length === 0 ? 'no jobs' : mine.map((job) => `${job.id}  ${job.status}${job.limit ? ` (limits.${job.limit})` : ''}  ${job.description}`).join('\n')
      },
    }),
  ]
}
