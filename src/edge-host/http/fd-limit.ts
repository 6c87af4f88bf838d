// The host's open-file limit. Every client connection is a file descriptor, so a soft limit of the
// usual 1,024 let about a thousand idle connections starve everyone else (accept fails with
// EMFILE). Node raises its soft limit to the hard one as it starts (PlatformInit in node.cc), so
// the host runs with all the system allows; under systemd, LimitNOFILE= in the unit sets that
// (deploy/systemd). The host reads the figure to log it and to size its connection budget
// (./connection-guard.ts).
import {readFileSync} from 'node:fs'

export interface FdLimit {
  soft: number
  hard: number
}

/** Assumed where /proc/self/limits cannot be read: the common default. */
const ASSUMED_LIMIT: FdLimit = {soft: 1_024, hard: 1_024}

/** The open-file limits of this process, from the kernel's own account; `known` false when assumed. */
export function readFdLimit(): FdLimit & {known: boolean} {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((text) => text.startsWith('Max open files'))
    const [soft, hard] = (line ?? '').slice('Max open files'.length).trim().split(/\s+/).map(Number)
    if (Number.isInteger(soft) && Number.isInteger(hard)) return {soft: soft!, hard: hard!, known: true}
  } catch {}
  return {...ASSUMED_LIMIT, known: false}
}
