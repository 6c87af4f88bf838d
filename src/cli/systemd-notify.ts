// sd_notify(3) for a daemon under a systemd `Type=notify` unit: READY=1 once it serves, STOPPING=1
// when it begins to stop. The protocol is a datagram on the AF_UNIX socket systemd names in
// $NOTIFY_SOCKET, and Node has no Unix datagram sockets (dgram is UDP only), so systemd's own
// `systemd-notify` sends it: it is on every machine systemd runs, and since systemd 246 it waits
// until the manager has taken the message (a barrier), so the message is never lost to a race with
// its exit. The unit needs NotifyAccess=all, since the sender is a child of the main process.
import {execa} from 'execa'
import type {Logger} from 'pino'

/** How long systemd-notify may take: it only waits for the manager to read one datagram. */
const NOTIFY_TIMEOUT_MS = 10_000

/** Sends `fields` (READY=1, STATUS=…) to systemd when it started this process with a notify socket; otherwise nothing. */
export async function notifySystemd(fields: Record<string, string>, log: Pick<Logger, 'warn'>): Promise<void> {
  if (!process.env.NOTIFY_SOCKET) return
  const assignments = Object.entries(fields).map(([key, value]) => `${key}=${value}`)
  try {
    await execa('systemd-notify', assignments, {timeout: NOTIFY_TIMEOUT_MS, stdin: 'ignore'})
  } catch (error) {
    const why = error instanceof Error ? error.message.split('\n')[0] : String(error)
    log.warn({fields: assignments}, `could not tell systemd ${assignments.join(' ')} (${why}); a Type=notify unit waits for READY=1 until TimeoutStartSec`)
  }
}
