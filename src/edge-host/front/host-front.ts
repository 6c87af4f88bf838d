// The front door of one host (host.front = "haproxy", or "auto" with a haproxy installed): ./front.ts
// wired to the host's state, shards, tails and metrics.
import type {Logger} from 'pino'
import type {HostSettings} from '../services/host-service.js'
import type {HostMetrics} from '../metrics.js'
import type {WorkerdRuntime} from '../runtime/runtime.js'
import type {Shard} from '../runtime/shard.js'
import type {HostState} from '../state/host-state.js'
import type {TailHub} from '../tail-hub.js'
import {fastTargets} from './fast-path.js'
import {HaproxyFront} from './front.js'
import type {FrontChoice} from './front-choice.js'

export interface FrontDoorOptions {
  dataDir: string
  settings: HostSettings
  maxConnections: number
  metrics: HostMetrics
  runtime: WorkerdRuntime
  state: HostState
  tails: TailHub
  log: Logger
}

/** The front door host.front resolved to for this start (`choice`, logged here once), or null: the Node data plane listens itself. */
export function frontDoor(choice: FrontChoice, options: FrontDoorOptions): HaproxyFront | null {
  const {settings, state, runtime, tails, metrics} = options
  const detail = choice.front === 'haproxy' ? {haproxy: choice.binary, haproxyVersion: choice.version} : {reason: choice.reason}
  options.log.info({front: choice.front, setting: settings.front, ...detail}, `front door: ${choice.front}`)
  if (choice.front === 'node') return null
  return new HaproxyFront({
    dataDir: options.dataDir,
    binary: choice.binary,
    config: {
      baseDomain: settings.base_domain,
      maxConnections: options.maxConnections,
      maxConnectionsPerAddress: settings.max_connections_per_address,
      headerTimeoutMs: settings.header_timeout_ms,
      requestTimeoutMs: settings.request_timeout_ms,
      idleTimeoutMs: settings.idle_timeout_ms,
    },
    drainTimeoutMs: settings.drain_timeout_ms,
    fastTargets: () =>
      fastTargets({
        shards: runtime.shards,
        route: (script) => state.route(script),
        // With worker events off there are no tails (management answers 404 for them).
        isTailed: (script) => tails.isTailed(script),
        hasAssets: (script, generation) => state.releaseAssets.of(script, generation) !== null,
      }),
    countRequests: (script, statusClass, count) => {
      metrics.requests.inc({script, status: statusClass}, count)
      tails.frontServed(script, statusClass, count)
    },
    log: options.log.child({component: 'front'}),
  })
}

/** The shards' hooks into the front door, which they do not know (none while there is none): see RuntimeOptions. */
export function frontRuntimeHooks(front: () => HaproxyFront | null) {
  return {
    suspectOutsideHost: async (shard: Shard): Promise<string | null> => front()?.suspect(new Set(shard.ownSockets().keys())) ?? null,
    outsideRequestsDone: async (socketPaths: ReadonlyMap<string, string>, timeoutMs: number): Promise<void> =>
      front()?.drained(new Set(socketPaths.values()), timeoutMs),
  }
}
