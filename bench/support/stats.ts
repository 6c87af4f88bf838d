// The statistics every benchmark prints, the machine's load beside them, and the progress line on stderr.
import os from 'node:os'

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

/** The value below which `percent` % of the values fall (nearest rank). */
export function percentile(values: number[], percent: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * percent) / 100))]!
}

export function log(message: string): void {
  process.stderr.write(`${message}\n`)
}

/** Printed with each figure: these machines are shared, and a figure means little without it. */
export function machineLoad(): string {
  return `${os.cpus().length} CPUs, load average ${os
    .loadavg()
    .map((value) => value.toFixed(1))
    .join(' ')}`
}
