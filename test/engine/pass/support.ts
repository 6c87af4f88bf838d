// Shared set-up for the pass tests: an engine over the harness store with a ready provider (no host:
// the lanes never call it when the dispatch is injected), a recording logger, seeded Workers and
// versions, and a recording dispatch that does what the deploy task does to the row — lease it,
// settle it — without a host.
import {mkdtempSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {artifactKeyFor, FileArtifactStore, type ArtifactStore} from '../../../src/artifacts/store.js'
import {sha256Hex} from '../../../src/canonical-json.js'
import {settingsSchema, type Settings} from '../../../src/config/schema.js'
import type {Engine, EngineLogger} from '../../../src/engine/context.js'
import {enqueueDeploy} from '../../../src/engine/deploy/enqueue.js'
import {leaseDeployRow, type DeployTaskArgs, type DeployTaskResult} from '../../../src/engine/deploy/task.js'
import type {DispatchDeploy} from '../../../src/engine/pass/index.js'
import {nextAttemptAt} from '../../../src/engine/retry.js'
import type {ProviderResolution} from '../../../src/engine/provider.js'
import type {EdgeProvider} from '../../../src/provider/types.js'
import {scriptNameFor, type OutboxRow, type VersionRow, type VersionState, type WorkerRow} from '../../../src/store/index.js'
import type {StoreHarness} from '../../support/stores.js'
import {onPremHosts} from '../../../src/provider/onprem/hosts.js'

export const SCOPE = 'onprem:0123456789ab'
export const OWNER = 'pass-test-runner'

type DeepPartial<T> = {[K in keyof T]?: T[K] extends object ? (T[K] extends unknown[] ? T[K] : DeepPartial<T[K]>) : T[K]}
export type SettingsOverrides = DeepPartial<Omit<Settings, 'store' | 'data_dir'>>

export interface LogLine {
  level: 'debug' | 'info' | 'warn' | 'error'
  fields: object
  message: string
}

export function recordingLogger(): EngineLogger & {lines: LogLine[]; messages(level?: LogLine['level']): string[]} {
  const lines: LogLine[] = []
  const at = (level: LogLine['level']) => (fields: object, message: string) => void lines.push({level, fields, message})
  return {
    lines,
    messages: (level) => lines.filter((line) => !level || line.level === level).map((line) => line.message),
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
  }
}

/** A ready provider for a host of `scope` that lists no scripts; `provider` replaces any of its calls. */
export function readyProvider(provider: Partial<EdgeProvider> = {}, scope = SCOPE): ProviderResolution {
  const emptyHost: Partial<EdgeProvider> = {scope, listScripts: async () => ({scripts: [], nextCursor: null})}
  return {status: 'ready', scope, provider: {...emptyHost, ...provider} as EdgeProvider}
}

export function tempArtifactDir(): string {
  return mkdtempSync(path.join(tmpdir(), 'edgeworkers-pass-'))
}

export interface TestEngine extends Engine {
  log: ReturnType<typeof recordingLogger>
}

export async function passEngine(
  t: StoreHarness,
  options: {
    settings?: SettingsOverrides
    resolution?: ProviderResolution | (() => Promise<ProviderResolution>)
    artifacts?: ArtifactStore
    owner?: string
  } = {},
): Promise<TestEngine> {
  const settings = settingsSchema.parse(merge(t.settings() as unknown as Record<string, unknown>, (options.settings ?? {}) as Record<string, unknown>))
  const resolution = options.resolution ?? readyProvider()
  // The backoff ladder lives in the store (retryLater): an override needs a store opened with it.
  const backoff = options.settings?.backoff
  return {
    store: backoff ? await t.open(t.settings({backoff: backoff as Partial<Settings['backoff']>})) : t.store,
    settings,
    log: recordingLogger(),
    artifacts: options.artifacts ?? (await FileArtifactStore.open(tempArtifactDir())),
    owner: options.owner ?? OWNER,
    hosts: onPremHosts,
    resolveProvider: typeof resolution === 'function' ? resolution : async () => resolution,
  }
}

function merge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out = {...base}
  for (const [key, value] of Object.entries(over)) {
    const prior = out[key]
    const isTree = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)
    out[key] = isTree(prior) && isTree(value) ? merge(prior, value) : value
  }
  return out
}

let seeded = 0

/** A company, department, Worker and one version (artifact keys are made up: the lanes never read them). */
export async function seedWorker(t: StoreHarness, options: {versionState?: VersionState} = {}): Promise<{worker: WorkerRow; version: VersionRow}> {
  const n = ++seeded
  const company = await t.store.tenants.createCompany({id: `co-${n}`, name: `Company ${n}`})
  const department = await t.store.tenants.createDepartment({id: `dept-${n}`, company_id: company.id, name: `Department ${n}`})
  const worker = await t.store.workers.create({
    company_id: company.id,
    department_id: department.id,
    script_name: scriptNameFor(company.id, department.id),
    status: 'new',
  })
  const projectDigest = sha256Hex(`project ${n}`)
  const bundleDigest = sha256Hex(`bundle ${n}`)
  const version = await t.store.workers.createVersion({
    worker_id: worker.id,
    release_generation: `rg-${n}`,
    builder_policy: 'department-worker-project-v2.9',
    state: options.versionState ?? 'built',
    project_artifact_key: artifactKeyFor('project', projectDigest),
    project_digest: projectDigest,
    bundle_artifact_key: artifactKeyFor('bundle', bundleDigest),
    bundle_digest: bundleDigest,
    manifest: {},
    receipt: {},
  })
  return {worker, version}
}

/** A deploy row exactly as `deploy` enqueues it; `dispatcher` reserves it as a waiting `deploy` does. */
export async function enqueueDeployRow(engine: Engine, seed: {worker: WorkerRow; version: VersionRow}, dispatcher?: string): Promise<OutboxRow> {
  const {row} = await enqueueDeploy(engine, {worker: seed.worker, version: seed.version, scope: SCOPE, dispatcher})
  return row
}

export interface RecordingDispatch extends DispatchDeploy {
  /** The task arguments as a dispatch message carries them (the in-process claim left out). */
  calls: Omit<DeployTaskArgs, 'claim'>[]
  /** The outbox row as the task's lease left it, per call (the row as it was when the lease was refused). */
  rowsSeen: OutboxRow[]
}

/**
 * Stands in for the deploy task: leases the row as the task does and settles it with `outcome`
 * (default completed), or returns `outcome` untouched when it is not a settling one.
 */
export function recordingDispatch(
  outcome: (args: DeployTaskArgs) => DeployTaskResult | Promise<DeployTaskResult> = completedResult,
  scope = SCOPE,
): RecordingDispatch {
  const calls: Omit<DeployTaskArgs, 'claim'>[] = []
  const rowsSeen: OutboxRow[] = []
  const dispatch = async (engine: Engine, args: DeployTaskArgs): Promise<DeployTaskResult> => {
    const {claim: _claim, ...message} = args
    calls.push(message)
    const result = await outcome(args)
    if (result.outcome === 'retry_later' || result.outcome === 'skipped' || result.outcome === 'lease_lost') {
      rowsSeen.push((await engine.store.outbox.get(args.outboxId))!)
      return result
    }
    const lease = await leaseDeployRow(engine, args, scope)
    rowsSeen.push(lease.row ?? (await engine.store.outbox.get(args.outboxId))!)
    if (lease.disposition !== 'acquired') return {outcome: 'skipped', disposition: lease.disposition}
    const token = lease.row.lease_token!
    if (result.outcome === 'retry') {
      const retried = await engine.store.outbox.retryLater(args.outboxId, token, {
        errorCode: result.code,
        error: result.message,
        // As the task: this run asked the host, and its answer is a failed attempt.
        nextAttemptAt: nextAttemptAt(engine.settings.backoff, lease.row.attempts + 1, engine.store.clock.now()),
        waits: 0,
        attempted: true,
      })
      return {...result, exhausted: retried.outcome === 'failed'}
    }
    await engine.store.outbox.settle(
      args.outboxId,
      token,
      result.outcome === 'completed'
        ? {status: 'completed', attempted: true}
        : {status: result.outcome === 'superseded' ? 'cancelled' : result.outcome, errorCode: result.code, error: result.message, attempted: true},
    )
    return result
  }
  return Object.assign(dispatch, {calls, rowsSeen})
}

function completedResult(args: DeployTaskArgs): DeployTaskResult {
  return {outcome: 'completed', versionId: 'v', releaseGeneration: 'rg', scriptName: args.outboxId, reconciled: false}
}
