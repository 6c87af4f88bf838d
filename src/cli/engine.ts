// Builds the engine a command runs with: the store it opened, the artifact store under the data
// dir, a pino logger on stderr (JSON lines, for journald and cron mail) and provider resolution.
import pino from 'pino'
import {FileArtifactStore} from '../artifacts/store.js'
import type {Settings} from '../config/schema.js'
import {runnerIdentity, type Engine, type EngineLogger} from '../engine/context.js'
import {resolveProvider} from '../engine/provider.js'
import type {Store} from '../store/index.js'

export function cliLogger(level: Settings['log_level']): EngineLogger {
  return pino({level, base: {pid: process.pid}, timestamp: pino.stdTimeFunctions.isoTime}, pino.destination({fd: 2, sync: true}))
}

export async function buildEngine(store: Store, settings: Settings, log: EngineLogger): Promise<Engine> {
  return {
    store,
    settings,
    log,
    artifacts: await FileArtifactStore.open(settings.data_dir),
    owner: runnerIdentity(),
    resolveProvider: () => resolveProvider(store, settings),
  }
}
