/**
 * Background one-shot runs (CONTRACT.md §6): a job is owned by the agent that started it, runs
 * until its child settles, and is always disposed; its outcome is kept for `job_output`.
 */
import { textOf } from '../../protocol/shapes/content.js'
import { messageOf, subagentError } from '../../protocol/errors.js'
import type { LimitName } from '../../agent/limit-stop.js'
import type { SubagentRun } from '../types.js'

/** A limit stop's diagnostic is §11's exact text; the job names the limit from it. */
const LIMIT_DIAGNOSTIC = /^the child exceeded limits\.(timeoutMs|maxSteps|maxTotalTokens) \(/

function limitOf(diagnostic: string | undefined): LimitName | undefined {
  return diagnostic === undefined ? undefined : (LIMIT_DIAGNOSTIC.exec(diagnostic)?.[1] as LimitName | undefined)
}

export type JobStatus = 'running' | 'completed' | 'failed' | 'killed'

export interface JobInfo {
  id: string
  /** The id of the agent that started the job. */
  owner: string
  description: string
  runId: string
  status: JobStatus
  /** The child's final text, when completed. */
  output?: string
  /** Why it failed: `<stopReason>` or `<stopReason>; diagnostic: <diagnostic>`, then any dispose failure. */
  detail?: string
  /** The limit that ended it, when one did (CONTRACT.md §11): it is then `killed`, with the diagnostic as `detail`. */
  limit?: LimitName
}

export interface JobRegistry {
  /** Tracks a started run as a job; `stop` cancels it (for `kill`). */
  register(owner: string, description: string, run: SubagentRun, stop: AbortController): JobInfo
  get(id: string): JobInfo | undefined
  list(owner?: string): JobInfo[]
  /** Resolves with the job once it has settled and its child was disposed. */
  wait(id: string): Promise<JobInfo>
  /** Cancels a running job and waits for it to settle. */
  kill(id: string): Promise<JobInfo>
}

interface Job {
  info: JobInfo
  stop: AbortController
  settled: Promise<JobInfo>
}

export function createJobRegistry(): JobRegistry & { killAll(): Promise<void>; endJobsOf(owner: string): Promise<void> } {
  const jobs = new Map<string, Job>()
  let next = 1
  const find = (id: string): Job => {
    const job = jobs.get(id)
    if (!job) throw subagentError('ERR_SUBAGENT_UNKNOWN_NAME', `unknown job "${id}": host.jobs.list() names the jobs this host knows`)
    return job
  }
  const snapshot = (info: JobInfo): JobInfo => ({ ...info })

  return {
    register(owner, description, run, stop) {
      const info: JobInfo = { id: `job-${next++}`, owner, description, runId: run.id, status: 'running' }
      const settled = settle(info, run).then(() => snapshot(info))
      jobs.set(info.id, { info, stop, settled })
      return snapshot(info)
    },
    get: (id) => {
      const job = jobs.get(id)
      return job && snapshot(job.info)
    },
    list: (owner) => [...jobs.values()].filter((job) => owner === undefined || job.info.owner === owner).map((job) => snapshot(job.info)),
    wait: (id) => find(id).settled,
    kill(id) {
      const job = find(id)
      if (job.info.status === 'running') job.stop.abort({ kind: 'job-killed' })
      return job.settled
    },
    async killAll() {
      await Promise.all([...jobs.keys()].map((id) => this.kill(id)))
    },
    /** A disposed child's jobs could never be collected: stop them and forget them. */
    async endJobsOf(owner) {
      const owned = [...jobs.values()].filter((job) => job.info.owner === owner)
      await Promise.all(owned.map((job) => this.kill(job.info.id)))
      for (const job of owned) jobs.delete(job.info.id)
    },
  }
}

async function settle(info: JobInfo, run: SubagentRun): Promise<void> {
  // Dispose only after the result: disposing a running child would cancel it.
  const [result] = await Promise.allSettled([run.result])
  const [disposal] = await Promise.allSettled([run.dispose()])
  if (result.status === 'rejected') {
    info.status = 'failed'
    info.detail = `error; diagnostic: ${messageOf(result.reason)}`
  } else {
    const { stopReason, diagnostic, output } = result.value
    if (stopReason === 'completed') {
      info.status = 'completed'
      info.output = textOf(output)
    } else if (stopReason === 'aborted') {
      info.status = 'killed'
      const limit = limitOf(diagnostic)
      if (limit) {
        info.limit = limit
        info.detail = diagnostic
      }
    } else {
      info.status = 'failed'
      info.detail = diagnostic === undefined ? stopReason : `${stopReason}; diagnostic: ${diagnostic}`
    }
  }
  // The outcome stands; a failed release is appended to it.
  if (disposal.status === 'rejected') info.detail = [info.detail, `dispose failed: ${messageOf(disposal.reason)}`].filter(Boolean).join('; ')
}
