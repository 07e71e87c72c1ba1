/** `NODE_OPTIONS` split as Node splits it, for the host's options a runner thread is given (endpoints/thread-start.ts). */
import { describe, expect, it } from 'vitest'
import { nodeOptions } from '../../dist/parent/runners/endpoints/thread-start.js'

describe('NODE_OPTIONS, split', () => {
  it.each([
    ['', []],
    ['   ', []],
    ['--enable-source-maps', ['--enable-source-maps']],
    ['  --a   --b=1 ', ['--a', '--b=1']],
    ['--title "a host"', ['--title', 'a host']],
    ['--conditions="x y"z', ['--conditions=x yz']],
    ['"--a" "" --b', ['--a', '--b']],
    ['--import "C:\\\\dir\\"s\\\\x.js"', ['--import', 'C:\\dir"s\\x.js']],
    ['--a\\b', ['--a\\b']],
  ])('%j', (value, options) => {
    expect(nodeOptions(value)).toEqual(options)
  })
})
