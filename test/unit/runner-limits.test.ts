/** A runner thread's resource limits: the user's, over the library's young generation (endpoints/worker-thread.ts). */
import { describe, expect, it } from 'vitest'
import { RUNNER_YOUNG_GENERATION_MB, runnerLimits } from '../../dist/parent/runners/endpoints/worker-thread.js'

describe("a runner thread's resource limits", () => {
  it('cap the young generation when the user sets nothing, or sets only other limits', () => {
    expect(RUNNER_YOUNG_GENERATION_MB).toBe(48)
    expect(runnerLimits(undefined)).toEqual({ maxYoungGenerationSizeMb: 48 })
    expect(runnerLimits({ maxOldGenerationSizeMb: 512, stackSizeMb: 8 })).toEqual({ maxYoungGenerationSizeMb: 48, maxOldGenerationSizeMb: 512, stackSizeMb: 8 })
  })

  it("keep the user's own young generation, and never change the object given", () => {
    const given = { maxYoungGenerationSizeMb: 8 }
    expect(runnerLimits(given)).toEqual({ maxYoungGenerationSizeMb: 8 })
    expect(given).toEqual({ maxYoungGenerationSizeMb: 8 })
  })
})
