/** The `bench` command's flags: parsed strictly (node:util parseArgs), because a typo must not silently run (or skip) minutes of benchmarks. */
import { parseArgs } from 'node:util'
import { UsageError } from '../terminal/failure.js'

export const SCENARIO_IDS = ['S1', 'S2', 'S3', 'S4', 'S5', 'S6', 'S7', 'S8', 'S9', 'S9m', 'S9u', 'S9um', 'S10', 'S11', 'G2', 'G3', 'O3', 'O9'] as const
export type ScenarioId = (typeof SCENARIO_IDS)[number]

/** The A/B rows and S11 (runner kills): run only when --only names them, so a default run's table and time are as before. */
const NAMED_ONLY_IDS: readonly ScenarioId[] = ['S11', 'G2', 'G3', 'O3', 'O9']
const DEFAULT_IDS = SCENARIO_IDS.filter((id) => !NAMED_ONLY_IDS.includes(id))

/** How much each scenario measures (plan.ts): the full plan, --quick or --smoke. */
export type PlanName = 'full' | 'quick' | 'smoke'

export interface BenchArgs {
  plan: PlanName
  /** The scenarios to run, in table order. */
  only: ScenarioId[]
  json: string | undefined
  svg: string | undefined
  /** Whether to measure the remote column (false with --no-remote). */
  remote: boolean
  /** The Redis the remote column's nodes and hosts meet on. */
  redis: string
  help: boolean
}

/** The remote column's Redis unless --redis says otherwise: REDIS_URL, else the usual local one. */
export const DEFAULT_REDIS = 'redis://127.0.0.1:6379'

export const BENCH_USAGE = `usage: subagent-worker bench [--quick | --smoke] [--only S1,S5] [--json FILE] [--svg FILE]
                             [--no-remote] [--redis URL]

Runs each scenario inline, on worker threads, in child processes and (where it applies) on
BullMQ worker nodes in the same process run and prints two tables: the figures (scenario, inline,
worker, process, remote, floors, worker/inline, process/worker, remote/worker) and the goals
(scenario, transport, goal, figure, met?). A progress bar is drawn on stderr when it is a
terminal.

The remote column (S1-S4, S8, S9, S9m, S9u, S9um) is the BullMQ transport: two worker node processes
(subagent-worker node) on this machine, started for the run on a queue of its own and stopped at
its end, beside a bare BullMQ job round trip on the same Redis (the bullmq floor). It needs the
bullmq and ioredis packages and a Redis answering PING within a second; without them it is
skipped with one line on stderr and the rest runs as before.

G2, G3, O3 and O9 are A/B rows on the worker transport, same run, rounds taking turns: S2's and
S3's workloads with every limit set against none, and S3's and S9's traced (instrument() with the
OpenTelemetry SDK, a dev dependency) and listened to against neither. They run only when named.

S9u is S9 with a model written as a user would write it (a plain async generator awaiting a
timer between chunks) in place of the ScriptedModel, host-placed (S9u) and module-placed (S9um).

S11 kills a worker thread at most every second under 1,000 children, ten a thread, and reports
the fraction that complete and the latency a move adds (thread-mates survive). It runs only
when named.

  --quick        fewer samples and children: noisier figures in about a minute
  --smoke        the least that computes every figure: shows the bench runs end to end (as
                 in CI); its figures say nothing
  --only IDS     comma-separated scenario ids (${SCENARIO_IDS.join(', ')}); S9 selects S9m too, S9u S9um
  --json FILE    write every figure, the raw samples and the machine to FILE
  --svg FILE     write a self-contained SVG chart of the figures of every transport to FILE
  --no-remote    leave the remote column and its floor out (no Redis needed)
  --redis URL    the Redis of the remote column (default $REDIS_URL, else ${DEFAULT_REDIS})
  --help         this text
`

const OPTIONS = {
  quick: { type: 'boolean' },
  smoke: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  only: { type: 'string' },
  json: { type: 'string' },
  svg: { type: 'string' },
  'no-remote': { type: 'boolean' },
  redis: { type: 'string' },
} as const

export function parseBenchArgs(argv: readonly string[]): BenchArgs {
  let parsed: ReturnType<typeof parse>
  try {
    parsed = parse(argv)
  } catch (error) {
    throw new UsageError(usageMessage(error))
  }
  // parseArgs keeps the last of a repeated flag; two different values are a mistake worth saying.
  const seen = new Set<string>()
  for (const token of parsed.tokens) {
    if (token.kind !== 'option') continue
    if (seen.has(token.name)) throw new UsageError(`${token.rawName} is given twice`)
    seen.add(token.name)
    if (token.value === '') throw new UsageError(`${token.rawName} needs a value`)
  }
  const { values } = parsed
  if (values.quick && values.smoke) throw new UsageError('--quick and --smoke are two plans: give one')
  return {
    plan: values.smoke ? 'smoke' : values.quick ? 'quick' : 'full',
    help: values.help ?? false,
    only: values.only === undefined ? DEFAULT_IDS : parseOnly(values.only),
    json: values.json,
    svg: values.svg,
    remote: !(values['no-remote'] ?? false),
    redis: values.redis ?? (process.env.REDIS_URL || DEFAULT_REDIS),
  }
}

function parse(argv: readonly string[]) {
  return parseArgs({ args: [...argv], options: OPTIONS, strict: true, allowPositionals: false, tokens: true })
}

/** parseArgs's own errors, said the way this command says them. */
function usageMessage(error: unknown): string {
  const { code, message } = error as { code?: string; message?: string }
  const flag = /'(-{1,2}[^' ]+)/.exec(message ?? '')?.[1] ?? ''
  switch (code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return `unknown flag ${flag}`
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      return /does not take an argument/.test(message ?? '') ? `${flag} takes no value` : `${flag} needs a value`
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
      return `unexpected argument ${/'([^']*)'/.exec(message ?? '')?.[1] ?? ''}`
    default:
      return message ?? String(error)
  }
}

/** Ids a name selects: S9 and S9u are each one run with two rows (host model, module model), so each selects both. */
const ALIASES: Partial<Record<ScenarioId, readonly ScenarioId[]>> = { S9: ['S9', 'S9m'], S9u: ['S9u', 'S9um'] }

function parseOnly(list: string): ScenarioId[] {
  const wanted = new Set<ScenarioId>()
  for (const part of list.split(',')) {
    const id = SCENARIO_IDS.find((known) => known.toUpperCase() === part.trim().toUpperCase())
    if (id === undefined) throw new UsageError(`unknown scenario ${JSON.stringify(part.trim())} in --only (known: ${SCENARIO_IDS.join(', ')})`)
    for (const selected of ALIASES[id] ?? [id]) wanted.add(selected)
  }
  // Table order, whatever order they were named in.
  return SCENARIO_IDS.filter((id) => wanted.has(id))
}
