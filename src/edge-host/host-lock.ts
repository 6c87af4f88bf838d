// host.lock: one edge host per data dir.
import {readFile, rm, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {KitError} from '../errors.js'
import {isSameLiveProcess, processStartTime} from '../workerd/process-identity.js'

const LOCK_FILE = 'host.lock'

/**
 * One host per data dir: two would run the same Durable Objects from the same files. The lock file
 * names its holder by pid and start time, so a killed host — gone, a zombie not yet reaped, or its
 * pid reused by another process — never blocks the next start (../workerd/process-identity.ts).
 */
export async function acquireLock(dataDir: string): Promise<void> {
  const file = path.join(dataDir, LOCK_FILE)
  const holder = `${process.pid} ${processStartTime(process.pid) ?? ''}`
  try {
    await writeFile(file, holder, {flag: 'wx', mode: 0o600})
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    const [pid, startTime] = (await readFile(file, 'utf8').catch(() => '')).trim().split(' ')
    if (isSameLiveProcess(Number(pid), startTime ?? '')) {
      throw new KitError('conflict', `another edge host (pid ${pid}) is running on ${dataDir}`)
    }
    await writeFile(file, holder)
  }
}

export async function releaseLock(dataDir: string): Promise<void> {
  await rm(path.join(dataDir, LOCK_FILE), {force: true})
}
