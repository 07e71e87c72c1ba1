/** The heap in use after a full collection, for tests that bound what something keeps. */
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

/** Bytes in use after two full collections (the second frees what the first's finalizers let go). */
export function heapAfterCollection(): number {
  gc()
  gc()
  return process.memoryUsage().heapUsed
}
