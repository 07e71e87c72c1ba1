/**
 * The `ai` versions the adapter is tested on are the ones its peer range admits: `ai` 6 installed
 * as `ai`, 5 and 7 as the aliases `ai5` and `ai7`. A range that leaves out the current major makes
 * `npm install ai subagent-worker` fail with ERESOLVE.
 */
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'

const read = (path: string) => JSON.parse(readFileSync(new URL(path, import.meta.url), 'utf8')) as { version: string; peerDependencies?: Record<string, string> }

/** The majors a range of `^N.0.0 || ^M.0.0` alternatives admits. */
function majorsOf(range: string): number[] {
  return range.split('||').map((alternative) => {
    const match = /^\s*\^(\d+)\.\d+\.\d+\s*$/.exec(alternative)
    if (!match) throw new Error(`the ai peer range has an alternative this test does not read: ${alternative}`)
    return Number(match[1])
  })
}

describe('the ai peer range', () => {
  it('admits ai 5, 6 and 7, each the major of the copy the tests run on', () => {
    const majors = majorsOf(read('../../package.json').peerDependencies!.ai!)
    const installed = ['ai5', 'ai', 'ai7'].map((name) => Number(read(`../../node_modules/${name}/package.json`).version.split('.')[0]))
    expect(installed).toEqual([5, 6, 7])
    expect(majors).toEqual(expect.arrayContaining(installed))
  })
})
