/** The `bench` command's flags: parsed strictly, because a typo must not silently run (or skip) minutes of benchmarks. */

export const SCENARIO_IDS = ['S1', 'S2', 'S3', 'S4', 'S5', 'S6', 'S7', 'S8', 'S9', 'S9m'] as const
export type ScenarioId = (typeof SCENARIO_IDS)[number]

export interface BenchArgs {
  quick: boolean
  /** The scenarios to run, in table order. */
  only: ScenarioId[]
  json: string | undefined
  svg: string | undefined
  help: boolean
}

export const BENCH_USAGE = `usage: subagent-worker bench [--quick] [--only S1,S5] [--json FILE] [--svg FILE]

Runs each scenario inline and on worker threads in the same process and prints a table:
scenario, inline, worker, ratio, goal, met?. A progress bar is drawn on stderr when it is a terminal.

  --quick        smaller counts: the whole run finishes in under a minute
  --only IDS     comma-separated scenario ids (${SCENARIO_IDS.join(', ')}); S9 selects S9m too
  --json FILE    write every figure, the raw samples and the machine to FILE
  --svg FILE     write a self-contained SVG chart of the inline-vs-worker figures to FILE
  --help         this text
`

/** A bad command line: the caller prints the message and exits 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError'
}

export function parseBenchArgs(argv: readonly string[]): BenchArgs {
  const args: BenchArgs = { quick: false, only: [...SCENARIO_IDS], json: undefined, svg: undefined, help: false }
  const seen = new Set<string>()
  for (let i = 0; i < argv.length; i++) {
    const raw = argv[i]!
    // `--json=FILE` and `--json FILE` are both accepted, as most CLIs do.
    const eq = raw.startsWith('--') ? raw.indexOf('=') : -1
    const flag = eq > 0 ? raw.slice(0, eq) : raw
    const inline = eq > 0 ? raw.slice(eq + 1) : undefined
    const value = (): string => {
      const next = inline ?? argv[++i]
      if (next === undefined || next === '' || (inline === undefined && next.startsWith('--'))) throw new UsageError(`${flag} needs a value`)
      return next
    }
    if (seen.has(flag)) throw new UsageError(`${flag} is given twice`)
    seen.add(flag)
    switch (flag) {
      case '--quick':
      case '--help':
      case '-h':
        if (inline !== undefined) throw new UsageError(`${flag} takes no value`)
        if (flag === '--quick') args.quick = true
        else args.help = true
        break
      case '--only':
        args.only = parseOnly(value())
        break
      case '--json':
        args.json = value()
        break
      case '--svg':
        args.svg = value()
        break
      default:
        throw new UsageError(raw.startsWith('-') ? `unknown flag ${flag}` : `unexpected argument ${JSON.stringify(raw)}`)
    }
  }
  return args
}

/** Ids a name selects: S9 is one run with two rows (host model, module model), so it selects both. */
const ALIASES: Partial<Record<ScenarioId, readonly ScenarioId[]>> = { S9: ['S9', 'S9m'] }

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
