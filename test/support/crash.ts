// The crash tests' first half: the real CLI SIGKILLed at a fault point (EDGEWORKERS_FAULT), then the
// store as the later run sees it — on the wall clock, as the killed process was, moved past its lease.
import {execa} from 'execa'
import {expect} from 'vitest'
import type {FaultPoint} from '../../src/engine/faults.js'
import type {Settings} from '../../src/config/schema.js'
import {openStore, type Store} from '../../src/store/index.js'
import {CLI_BIN} from './cli.js'
import {AdvancedWallClock} from './stores.js'

/**
 * Runs `edgeworkers <args> --json` until it is killed at `point`; the store, opened past its lease.
 * `env`: further settings for the run (`EDGEWORKERS_<SECTION>__<KEY>`).
 */
export async function runCliKilledAt(args: string[], settings: Settings, point: FaultPoint, env: Record<string, string> = {}): Promise<Store> {
  const crashed = await execa('node', [CLI_BIN, ...args, '--json'], {
    reject: false,
    env: {
      EDGEWORKERS_DATA_DIR: settings.data_dir,
      EDGEWORKERS_STORE__URL: settings.store.url,
      EDGEWORKERS_DEPLOY__LEASE_SECONDS: String(settings.deploy.lease_seconds),
      EDGEWORKERS_FAULT: point,
      ...env,
    },
  })
  expect(crashed.signal, crashed.stderr).toBe('SIGKILL')
  return openStore(settings, {clock: new AdvancedWallClock(settings.deploy.lease_seconds * 1000 + 200)})
}
