// What the management listener does for each endpoint of the table (../../protocol/endpoints.ts): one
// handler per endpoint, handed its checked path parameters, its query and its validated body by the
// router (./management-server.ts). The compiler checks that every endpoint has a handler and that
// each answers its endpoint's response body.
import type {Readable} from 'node:stream'
import type {z} from 'zod'
import type {EndpointName, Endpoints} from '../../protocol/endpoints.js'
import type {Endpoint, PathParams} from '../../protocol/endpoint.js'
import {fenceIdSchema, READINESS_WAIT_MAX_MS} from '../../protocol/management-api.js'
import {putAssets} from '../assets/management.js'
import {HostError} from '../errors.js'
import type {ManagementServerOptions} from './management-server.js'
import {PairingRateLimited} from './pairing-limiter.js'
import type {TailHub} from '../tail-hub.js'

/** What the router hands a handler. */
export interface Call<E extends Endpoint> {
  params: PathParams<E>
  query: E extends {query: readonly (infer Q extends string)[]} ? {[K in Q]: string | null} : Record<never, never>
  /** The body after the endpoint's request schema (defaults filled in); undefined for endpoints that read none. */
  body: E extends {request: infer S extends z.ZodType} ? z.output<S> : undefined
  /** The peer's address. */
  source: string
}

/** A JSON answer; 200 unless `status` says otherwise. */
export interface JsonReply<T> {
  status?: number
  body: T
}

/** A non-JSON body streamed to the caller; `dispose` runs once it ended or the caller went away. */
export interface StreamReply {
  stream: Readable
  dispose(): Promise<void>
}

export interface TextReply {
  contentType: string
  text: string
}

export type Reply<E extends Endpoint> = E['answer'] extends 'json'
  ? JsonReply<E['response'] extends z.ZodType ? z.input<E['response']> : never>
  : E['answer'] extends 'prometheus'
    ? TextReply
    : StreamReply

export type Handler<E extends Endpoint> = (call: Call<E>) => Reply<E> | Promise<Reply<E>>
export type Handlers = {[K in EndpointName]: Handler<Endpoints[K]>}

const ok = <T>(body: T): JsonReply<T> => ({body})

export function managementHandlers(options: ManagementServerOptions): Handlers {
  const {service} = options

  const workerEvents = (): TailHub => {
    if (!options.tails) throw new HostError('worker_events_off', 'this host collects no Worker events (host.worker_events is false)')
    return options.tails
  }

  /** Pairing, refused for a while to a source that keeps sending wrong codes. */
  const pair = (code: string, source: string) => {
    const retryAfter = options.pairingLimiter.retryAfterSeconds(source)
    if (retryAfter > 0) throw new PairingRateLimited(retryAfter)
    try {
      return service.pair(code)
    } catch (error) {
      if (error instanceof HostError && error.code === 'pairing_code_invalid') options.pairingLimiter.recordFailure(source)
      throw error
    }
  }

  return {
    livez: () => ok({status: 'ok' as const}),
    readyz: () => ({status: options.ready() ? 200 : 503, body: options.readinessDetail()}),
    metrics: async () => ({contentType: options.metrics.registry.contentType, text: await options.metrics.registry.metrics()}),
    identity: () => ok(service.identity()),
    pair: ({body, source}) => ok(pair(body.code, source)),
    kitReadiness: ({body}) => ok(options.kitReadiness.set(body.serving)),
    inventory: () => ok(service.inventory()),
    listScripts: ({query}) => ok(service.list(query.limit, query.cursor)),
    uploadScript: async ({params, body}) => ok(await service.upload(params.name, body)),
    missingAssets: async ({body}) => ok({missing: await options.assetFiles.missing(body.hashes)}),
    putAssets: async ({body}) => ok({stored: await putAssets(options.assetFiles, body.files, options.maxAssetBytes, options.log)}),
    unreferencedAssets: async () => ok({unreferenced: await options.assetFiles.unreferenced(options.state.releaseAssets.referencedHashes())}),
    script: ({params}) => ok(service.details(params.name)),
    retire: ({params}) => ok(service.retire(params.name)),
    purgeScriptData: async ({params}) => ok(await service.purgeData(params.name)),
    handOver: async ({params}) => ok(await service.handovers.handOver(params.name)),
    scriptData: async ({params}) => ok(await service.handovers.read(params.name)),
    importScriptData: async ({params, body}) => ok(await service.handovers.write(params.name, body)),
    dropScriptData: async ({params}) => ok(await service.handovers.drop(params.name)),
    lockdown: ({params, body}) => ok(service.lockdown(params.name, body)),
    accessPolicy: async ({params, query}) => {
      const waitMs = readinessWaitMs(query.waitMs)
      return ok(
        query.releaseGeneration !== null && waitMs > 0
          ? await service.awaitLive(params.name, query.releaseGeneration, waitMs)
          : service.accessPolicy(params.name, query.releaseGeneration),
      )
    },
    replaceAccessPolicy: ({params, body}) => ok(service.control.replaceAccessPolicy(params.name, body)),
    rotateApiKey: ({params, body}) => ok(service.control.rotateApiKey(params.name, body)),
    revokeApiKey: ({params, body}) => ok(service.control.revokeApiKey(params.name, body)),
    runtimeConfig: ({params}) => ok(service.control.runtimeConfig(params.name)),
    putRuntimeConfig: ({params, body}) => ok(service.control.putRuntimeConfig(params.name, params.key, body)),
    deleteRuntimeConfig: ({params, body}) => ok(service.control.deleteRuntimeConfig(params.name, params.key, body)),
    operationSettings: ({params}) => ok(service.control.operationSettings(params.name)),
    replaceOperationSettings: ({params, body}) => ok(service.control.replaceOperationSettings(params.name, body)),
    revokeOperationSettings: ({params, body}) => ok(service.control.revokeOperationSettings(params.name, body)),
    secrets: ({params}) => ok(service.control.secrets(params.name)),
    purgeSecrets: ({params, body}) => ok(service.control.purgeSecrets(params.name, body)),
    putSecret: ({params, body}) => ok(service.control.putSecret(params.name, params.secret, body)),
    deleteSecret: ({params, body}) => ok(service.control.deleteSecret(params.name, params.secret, body)),
    serviceAccounts: ({params}) => ok(service.control.serviceAccounts(params.name)),
    purgeServiceAccounts: ({params, body}) => ok(service.control.purgeServiceAccounts(params.name, body)),
    putServiceAccount: ({params, body}) => ok(service.control.putServiceAccount(params.name, params.id, body)),
    deleteServiceAccount: ({params, body}) => ok(service.control.deleteServiceAccount(params.name, params.id, body)),
    controlCopy: ({params}) => ok(service.control.copy(params.name)),
    putControlCopy: async ({params, body}) => ok(await service.control.writeCopy(params.name, body)),
    receipt: ({params, query}) => ok(service.receipt(params.mutationId, query.commandDigest)),
    receiptAck: ({params}) => ok(service.acknowledgeReceipt(params.mutationId)),
    tail: ({params}) => {
      service.details(params.name) // script_not_found for a name the host never had
      return workerEvents().subscribe(params.name, () => options.traces.traceScript(params.name))
    },
    d1Query: async ({params, body}) => ok(await service.d1.query(params.name, body)),
    queues: async ({params}) => ok(await service.queues.list(params.name)),
    cronTriggers: ({params}) => ok(service.cronTriggers(params.name)),
    workerActivity: async () => {
      const events = workerEvents()
      await options.traces.readCounts() // the last errors of the Workers nobody traces, the fast path's requests
      return ok(events.activity())
    },
    fence: () => ok(service.fences.status()),
    beginFence: ({body}) => {
      const {fence, created} = service.fences.begin(body)
      return {status: created ? 201 : 200, body: fence}
    },
    fenceById: ({params}) => ok(service.fences.get(params.fenceId)),
    fenceEnd: ({params}) => ok(service.fences.end(params.fenceId)),
    snapshot: ({query}) => service.fences.snapshot(checkedValue(fenceIdSchema, query.fenceId ?? '', 'fence id')),
  }
}

/** The readiness probe's `waitMs`: absent is 0 (answer at once). */
function readinessWaitMs(text: string | null): number {
  if (text === null) return 0
  const waitMs = Number(text)
  if (!/^\d+$/.test(text) || waitMs > READINESS_WAIT_MAX_MS)
    throw new HostError('invalid_request', `waitMs must be a whole number of milliseconds up to ${READINESS_WAIT_MAX_MS}, not ${JSON.stringify(text)}`)
  return waitMs
}

/** A path or query value its schema refuses: invalid_request naming what it should have been. */
export function checkedValue(schema: z.ZodType<string>, text: string, what: string): string {
  if (!schema.safeParse(text).success) throw new HostError('invalid_request', `${JSON.stringify(text)} is not a valid ${what}`)
  return text
}
