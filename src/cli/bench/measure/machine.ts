/** The machine a run was measured on: figures mean nothing without it. */
import { availableParallelism, cpus, loadavg, platform, arch, totalmem } from 'node:os'

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
  /** 1-minute load average when the run started. */
  loadAverage: number
  /** Share of all cores busy with other work just before the run (0-1): a busy machine skews every figure. */
  backgroundBusy: number
  /** Share of all cores other processes used during the run (0-1), filled in when it ends. */
  otherLoadDuringRun?: number
}

interface CpuSnapshot {
  idle: number
  total: number
  /** This process's own CPU time (all its threads), in ms. */
  own: number
  at: number
}

function snapshot(): CpuSnapshot {
  let idle = 0
  let total = 0
  for (const cpu of cpus()) {
    idle += cpu.times.idle
    total += cpu.times.user + cpu.times.nice + cpu.times.sys + cpu.times.irq + cpu.times.idle
  }
  const { user, system } = process.cpuUsage()
  return { idle, total, own: (user + system) / 1000, at: performance.now() }
}

/**
 * Measures how much of the machine other processes used between `start()` and `stop()`: all
 * busy CPU time minus this process's own. A shared machine skews every figure, so a run says so.
 */
export function otherLoad(): { stop(): number } {
  const before = snapshot()
  return {
    stop() {
      const after = snapshot()
      const total = after.total - before.total
      if (total <= 0) return 0
      const busy = total - (after.idle - before.idle)
      return Math.min(1, Math.max(0, (busy - (after.own - before.own)) / total))
    },
  }
}

/** How busy the cores are with other work, sampled over `ms` while this process sleeps. */
export async function backgroundBusy(ms = 500): Promise<number> {
  const probe = otherLoad()
  await new Promise((resolve) => setTimeout(resolve, ms))
  return probe.stop()
}

export function machineInfo(busy: number): MachineInfo {
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
    loadAverage: loadavg()[0] ?? 0,
    backgroundBusy: busy,
  }
}

export function describeMachine(info: MachineInfo): string {
  return `${info.cores} cores (${info.cpuModel}), Node ${info.node}, ${info.platform}/${info.arch}, ${(info.totalMemoryBytes / 2 ** 30).toFixed(0)} GiB; other processes' load: ${Math.round(info.backgroundBusy * 100)} % CPU before the run${info.otherLoadDuringRun === undefined ? '' : `, ${Math.round(info.otherLoadDuringRun * 100)} % during it`}`
}
