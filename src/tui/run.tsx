// Runs the live status view on the terminal until the operator quits: on the alternate screen, so the
// shell's screen comes back untouched, and restored however the view ends (q, ctrl-c, SIGINT, SIGTERM, SIGHUP).
import {render} from 'ink'
import type {StatusSource} from '../engine/status/source.js'
import {StatusApp} from './status-app.js'

const ENTER_ALTERNATE_SCREEN = '\u001B[?1049h'
const LEAVE_ALTERNATE_SCREEN = '\u001B[?1049l'

export async function runStatusTui(source: StatusSource, options: {intervalMs: number}): Promise<void> {
  process.stdout.write(ENTER_ALTERNATE_SCREEN)
  const instance = render(<StatusApp source={source} intervalMs={options.intervalMs} />, {exitOnCtrlC: false})
  const stop = () => instance.unmount()
  process.once('SIGINT', stop).once('SIGTERM', stop).once('SIGHUP', stop)
  try {
    await instance.waitUntilExit()
  } finally {
    process.off('SIGINT', stop).off('SIGTERM', stop).off('SIGHUP', stop)
    instance.cleanup()
    process.stdout.write(LEAVE_ALTERNATE_SCREEN)
  }
}
