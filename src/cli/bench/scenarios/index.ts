/** Every scenario, in table order. S5's run also yields S6's row, S9's S9m's and S9u's S9um's, so both ids map to it. */
import type { ScenarioId } from '../args.js'
import { g2, g3, o3, o9 } from './ab.js'
import { s8 } from './abort.js'
import { s10 } from './cold-start.js'
import { s5 } from './cpu.js'
import { s1, s2 } from './latency.js'
import { s7 } from './memory.js'
import { s11 } from './moves.js'
import type { Scenario } from './scenario.js'
import { s9, s9u } from './stream.js'
import { s3, s4 } from './throughput.js'

export const SCENARIOS: readonly Scenario[] = [s1, s2, s3, s4, s5, s7, s8, s9, s9u, s10, s11, g2, g3, o3, o9]

/** The scenarios to run for the selected rows (each once, even when it yields several of them). */
export function scenariosFor(ids: readonly ScenarioId[]): Scenario[] {
  return SCENARIOS.filter((scenario) => scenario.ids.some((id) => ids.includes(id)))
}
