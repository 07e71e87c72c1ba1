/**
 * The raw floor's worker: the least a pooled child could cost. Nothing of the library is loaded.
 * The default task receives a transferred MessagePort and sends one message back on it (the
 * floor of S1-S3); `burn` does the same CPU work as the bench module's tool (the floor of S5).
 */
import type { MessagePort } from 'node:worker_threads'
import { work } from '../work.js'

export default function floorTask({ port }: { port: MessagePort }): void {
  port.postMessage(1)
  port.close()
}

export function burn({ iterations }: { iterations: number }): number {
  return work(iterations)
}
