// Whether the kit lets this host take traffic (docs/many-hosts.md). In a kit of several hosts behind
// a load balancer, a host that restarts may have missed deploys while it was down: with
// host.await_kit_confirmation it answers /readyz 503 after every start until the kit has brought it
// current and said so, so the balancer never sends it a request for stale code. The kit also drains a
// host this way. Held in memory on purpose: a restart forgets the confirmation and waits for a new one.
import type {Logger} from 'pino'
import type {KitReadiness, Readiness} from '../protocol/management-api.js'
import type {WorkerdRuntime} from './runtime/runtime.js'

/** What /readyz answers (both listeners): the shards serve, and the kit admits this host. */
export function hostReadiness(runtime: Pick<WorkerdRuntime, 'ready' | 'shards'>, awaitKit: boolean, log: Logger) {
  const kitReadiness = new KitReadinessState(awaitKit, log)
  const ready = () => runtime.ready() && kitReadiness.admits()
  const readinessDetail = (): Readiness => ({
    ready: ready(),
    shards: runtime.shards.map((shard) => ({index: shard.index, state: shard.state})),
    kit: kitReadiness.view(),
  })
  return {ready, readinessDetail, kitReadiness}
}

export class KitReadinessState {
  /** null until the kit said anything since this start. */
  private serving: boolean | null = null

  constructor(
    private readonly awaitKit: boolean,
    private readonly log: Logger,
  ) {}

  /** false while the kit has drained the host or (awaiting it) not yet confirmed it. */
  admits(): boolean {
    return this.serving ?? !this.awaitKit
  }

  set(serving: boolean): KitReadiness {
    if (this.serving !== serving) this.log.info({serving}, serving ? 'the kit confirmed this host current' : 'the kit drained this host')
    this.serving = serving
    return this.view()
  }

  view(): KitReadiness {
    return {awaitingKit: this.awaitKit && this.serving === null, drained: this.serving === false}
  }
}
