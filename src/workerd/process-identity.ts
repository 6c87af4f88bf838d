// Telling a live process from a dead, zombie or reused pid. A pid alone is not an identity: a killed
// process stays in the table as a zombie until its parent reaps it (kill(pid, 0) still succeeds), and
// the kernel hands a freed pid to the next process. On Linux /proc/<pid>/stat says both the state and
// the start time (clock ticks since boot), and pid + start time names one process for the machine's
// uptime. Without /proc (not Linux) a pid is taken at its word.
import {readFileSync} from 'node:fs'

const HAS_PROC = (() => {
  try {
    readFileSync('/proc/self/stat', 'utf8')
    return true
  } catch {
    return false
  }
})()

/**
 * The start time of a running process (`/proc` field 22), '' where /proc does not exist, or null
 * when no such process runs — it is gone, a zombie (Z) or dead (X).
 */
export function processStartTime(pid: number): string | null {
  if (!Number.isInteger(pid) || pid <= 0) return null
  if (!HAS_PROC) return signalable(pid) ? '' : null
  let stat: string
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return null
  }
  // The command name (field 2) is in parentheses and may hold spaces: fields after it are split from the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  const state = fields[0]
  if (state === 'Z' || state === 'X' || state === 'x') return null
  return fields[19] ?? null
}

/** Whether the process recorded as (pid, start time) still runs; a reused pid is another process. */
export function isSameLiveProcess(pid: number, startTime: string): boolean {
  const now = processStartTime(pid)
  return now !== null && (now === '' || startTime === '' || now === startTime)
}

function signalable(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}
