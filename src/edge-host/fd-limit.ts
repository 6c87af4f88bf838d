// The host's open-file limit. Every client connection is a file descriptor, so a soft limit left at
// the usual 1,024 lets about a thousand idle connections starve everyone else (accept fails with
// EMFILE). At start the host raises its soft limit to the hard one — Node has no setrlimit, so it
// asks util-linux's `prlimit` to do it for its own pid — and sizes its connection budget from what
// it got (./connection-guard.ts). Under systemd, LimitNOFILE= in the unit sets both.
import {execFileSync} from 'node:child_process'
import {readFileSync} from 'node:fs'

export interface FdLimit {
  soft: number
  hard: number
  /** The soft limit before the raise; equal to `soft` when nothing changed. */
  before: number
  /** Why the soft limit is still below the hard one, if it is. */
  problem?: string
}

/** Assumed where /proc/self/limits cannot be read: the common default. */
const ASSUMED_SOFT_LIMIT = 1_024

export function raiseFdLimit(): FdLimit {
  const before = readFdLimit()
  if (before === null) return {soft: ASSUMED_SOFT_LIMIT, hard: ASSUMED_SOFT_LIMIT, before: ASSUMED_SOFT_LIMIT, problem: 'cannot read /proc/self/limits'}
  if (before.soft >= before.hard) return {...before, before: before.soft}
  let problem: string | undefined
  try {
    execFileSync('prlimit', ['--pid', String(process.pid), `--nofile=${before.hard}:${before.hard}`], {stdio: ['ignore', 'ignore', 'pipe'], timeout: 5_000})
  } catch (error) {
    const stderr = (error as {stderr?: Buffer}).stderr?.toString().trim()
    problem = `prlimit failed: ${stderr || (error as Error).message}`
  }
  const after = readFdLimit() ?? before
  return {...after, before: before.soft, ...(problem ? {problem} : {})}
}

/** The open-file limits of this process, from the kernel's own account. */
export function readFdLimit(): {soft: number; hard: number} | null {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((text) => text.startsWith('Max open files'))
    const [soft, hard] = (line ?? '').slice('Max open files'.length).trim().split(/\s+/).map(Number)
    return Number.isInteger(soft) && Number.isInteger(hard) ? {soft: soft!, hard: hard!} : null
  } catch {
    return null
  }
}
