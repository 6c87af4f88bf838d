// What every lane and command of the engine runs with. Built once per process by the CLI (or a
// test), which also gives it the kind of edge host it reaches; the engine never reads flags, env or
// files itself.
import os from 'node:os'
import {randomUUID} from 'node:crypto'
import {FileArtifactStore, type ArtifactStore} from '../artifacts/store.js'
import type {Settings} from '../config/schema.js'
import type {HostConnector} from '../provider/types.js'
import type {Store} from '../store/index.js'
import {resolveProvider, type ProviderResolution} from './provider.js'

/** Structured logging, satisfied by pino; `msg` is the specified log line (e.g. `Edge Worker recovery failed: …`). */
export interface EngineLogger {
  debug(fields: object, message: string): void
  info(fields: object, message: string): void
  warn(fields: object, message: string): void
  error(fields: object, message: string): void
}

export interface Engine {
  store: Store
  artifacts: ArtifactStore
  settings: Settings
  log: EngineLogger
  /** Lease owner written on every row this process leases: host, pid and a random suffix. */
  owner: string
  /** How edge hosts are paired and reached (on-prem: provider/onprem/hosts.ts, given by the CLI). */
  hosts: HostConnector
  resolveProvider(): Promise<ProviderResolution>
}

export function runnerIdentity(): string {
  return `${os.hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`
}

export const silentLogger: EngineLogger = {debug() {}, info() {}, warn() {}, error() {}}

/** The engine over an open store, with the file artifact store of the settings' data dir. */
export async function createEngine(store: Store, settings: Settings, hosts: HostConnector, log: EngineLogger = silentLogger): Promise<Engine> {
  return {
    store,
    settings,
    log,
    artifacts: await FileArtifactStore.open(settings.data_dir),
    owner: runnerIdentity(),
    hosts,
    resolveProvider: () => resolveProvider(store, settings, hosts),
  }
}
