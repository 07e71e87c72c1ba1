/** The machine a run was measured on: figures mean nothing without it. */
import { availableParallelism, cpus, platform, arch, totalmem } from 'node:os'

export interface MachineInfo {
  cores: number
  availableParallelism: number
  cpuModel: string
  node: string
  v8: string
  platform: string
  arch: string
  totalMemoryBytes: number
  gcExposed: boolean
}

export function machineInfo(): MachineInfo {
  const list = cpus()
  return {
    cores: list.length,
    availableParallelism: availableParallelism(),
    cpuModel: list[0]?.model.trim() ?? 'unknown',
    node: process.version,
    v8: process.versions.v8,
    platform: platform(),
    arch: arch(),
    totalMemoryBytes: totalmem(),
    gcExposed: typeof globalThis.gc === 'function',
  }
}

export function describeMachine(info: MachineInfo): string {
  return `${info.cores} cores (${info.cpuModel}), Node ${info.node}, ${info.platform}/${info.arch}, ${(info.totalMemoryBytes / 2 ** 30).toFixed(0)} GiB`
}
