/**
 * The live progress bar on stderr. It is drawn only when stderr is a terminal, so piped or
 * captured runs (CI, the tests, `2> file`) stay quiet; stdout carries only the table. The bar is
 * cli-progress, an optional peer: without it installed the bench runs the same, with no bar.
 */

export interface Progress {
  /** Names the scenario now running. */
  phase(label: string): void
  /** Marks units of planned work as done. */
  advance(units?: number): void
  stop(): void
}

const quiet: Progress = { phase() {}, advance() {}, stop() {} }

export async function createProgress(total: number, stream: NodeJS.WriteStream = process.stderr): Promise<Progress> {
  if (!stream.isTTY || total <= 0) return quiet
  let cliProgress: typeof import('cli-progress')
  try {
    cliProgress = await import('cli-progress')
  } catch {
    stream.write('(npm install cli-progress for a progress bar)\n')
    return quiet
  }
  const { Presets, SingleBar } = cliProgress
  const bar = new SingleBar(
    {
      stream,
      format: 'bench [{bar}] {percentage}% | {duration_formatted} | {label}',
      hideCursor: true,
      clearOnComplete: true,
      // Redraws happen on the bar's own timer, never inside a measured await.
      synchronousUpdate: false,
      fps: 5,
    },
    Presets.shades_classic,
  )
  bar.start(total, 0, { label: 'starting' })
  return {
    phase: (label) => bar.update({ label }),
    advance: (units = 1) => bar.increment(units),
    stop: () => bar.stop(),
  }
}
