/**
 * How a runner thread is started: on the runner bundle's entry, under the runner condition, with
 * the host's own Node options that a thread takes (runner-code.ts has why the bundle and the
 * condition).
 */
import { Worker, type WorkerOptions } from 'node:worker_threads'
import { RUNNER_CONDITION, runnerEntry } from './runner-code.js'

/**
 * The host's own Node options that a runner thread takes: a thread given options or an env of its
 * own (here, the runner condition and `pool.env`) inherits neither the host's command line nor its
 * `NODE_OPTIONS`, so both are passed on, less those a thread refuses (V8's and the process's, such
 * as `--max-old-space-size`, which hold for every thread anyway). Node names the ones it refuses
 * as it refuses them, before any thread starts; learned once.
 */
let threadArgv: readonly string[] | undefined

export function startThread(options: WorkerOptions): Worker {
  for (;;) {
    const inherited = (threadArgv ??= [...nodeOptions(process.env.NODE_OPTIONS ?? ''), ...process.execArgv])
    try {
      return new Worker(runnerEntry('entry'), { ...options, execArgv: [...inherited, RUNNER_CONDITION] })
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'ERR_WORKER_INVALID_EXEC_ARGV' || inherited.length === 0) throw error
      const refused = refusedOptions(error as Error)
      threadArgv = inherited.some((option) => refused.has(option)) ? withoutRefused(inherited, refused) : noneOf(inherited, error as Error)
    }
  }
}

/**
 * Node refused options it names otherwise than the host gave them (an alias, such as
 * `--experimental-shadow-realm`, is refused by the flag it stands for): the threads take none
 * of the host's options, and say so once.
 */
function noneOf(inherited: readonly string[], refusal: Error): string[] {
  process.emitWarning(`runner threads take none of this process's Node options (${inherited.join(' ')}): ${refusal.message}`, { code: 'SUBAGENT_THREAD_OPTIONS' })
  return []
}

/**
 * `NODE_OPTIONS` as Node splits it: on spaces, but within double quotes, where a backslash takes
 * the next character as it is; a quote itself starts no option. (The host started, so Node found
 * it well formed.)
 */
export function nodeOptions(value: string): string[] {
  const options: string[] = []
  let option: string | undefined
  let quoted = false
  for (let i = 0; i < value.length; i++) {
    const char = value[i]!
    if (char === ' ' && !quoted) {
      if (option !== undefined) options.push(option)
      option = undefined
    } else if (char === '"') {
      quoted = !quoted
    } else {
      option = (option ?? '') + (char === '\\' && quoted ? (value[++i] ?? '') : char)
    }
  }
  if (option !== undefined) options.push(option)
  return options
}

/** `options` less the refused ones, each with its value where that is the next argument (`--title name`). */
function withoutRefused(options: readonly string[], refused: ReadonlySet<string>): string[] {
  return options.filter((option, i) => !refused.has(option) && !(refused.has(options[i - 1]!) && !option.startsWith('-')))
}

/** The options Node named in refusing a thread's (ERR_WORKER_INVALID_EXEC_ARGV). */
function refusedOptions({ message }: Error): Set<string> {
  return new Set(message.slice(message.indexOf(': ') + 2).split(', '))
}
