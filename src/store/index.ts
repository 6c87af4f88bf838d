// The store: one async interface over SQLite (embedded default) and PostgreSQL (shared by many
// runners). Methods are grouped into repositories by concern; `transaction()` hands out the same
// repositories bound to one atomic transaction. Rows and row inputs use the column names
// (snake_case); options use camelCase. All SQL is shared between the backends (see ./schema.ts).
import {existsSync} from 'node:fs'
import path from 'node:path'
import type {Kysely} from 'kysely'
import type {Settings} from '../config/schema.js'
import {KitError} from '../errors.js'
import {StoreContext, systemClock, type Backend, type Clock} from './context.js'
import {compareMigrations, migrate, schemaStatus, type SchemaStatus} from './migrator.js'
import {redactedUrl} from '../util/redact.js'
import {AuditRepository} from './repositories/audit.js'
import {ControlAuditRepository} from './repositories/control-audits.js'
import {DeploymentRepository} from './repositories/deployments.js'
import {KitRepository} from './repositories/kit.js'
import {HostsRepository} from './repositories/hosts.js'
import {OwnersRepository} from './repositories/owners.js'
import {OutboxRepository} from './outbox/repository.js'
import {RetirementRepository} from './repositories/retirements.js'
import {StatusRepository} from './repositories/status.js'
import {SweepRepository} from './repositories/sweeps.js'
import {TenantRepository} from './repositories/tenants.js'
import {WorkerRepository} from './repositories/workers.js'
import type {Database} from './schema.js'
import {DEFAULT_SQLITE_FILE, openSqlite} from './sqlite/open.js'

export interface Repositories {
  tenants: TenantRepository
  workers: WorkerRepository
  outbox: OutboxRepository
  audit: AuditRepository
  kit: KitRepository
  hosts: HostsRepository
  owners: OwnersRepository
  deployments: DeploymentRepository
  sweeps: SweepRepository
  retirements: RetirementRepository
  status: StatusRepository
  controlAudits: ControlAuditRepository
}

export interface Store extends Repositories {
  readonly backend: Backend
  /** Where the store is, safe to print (no password). */
  readonly location: string
  readonly clock: Clock
  /** Runs `work` in one transaction (BEGIN IMMEDIATE on SQLite): all of its writes commit, or none. */
  transaction<T>(work: (tx: Repositories) => Promise<T>): Promise<T>
  /** Applies pending migrations and returns their names. */
  migrate(): Promise<string[]>
  schemaStatus(): Promise<SchemaStatus>
  close(): Promise<void>
}

export interface OpenStoreOptions {
  clock?: Clock
  /** Default true. false: a SQLite file that does not exist is an error, not created empty. */
  create?: boolean
}

export async function openStore(settings: Settings, options: OpenStoreOptions = {}): Promise<Store> {
  const target = storeTarget(settings)
  if (options.create === false && target.backend === 'sqlite' && !existsSync(target.file)) {
    throw new KitError('store_unavailable', `store ${target.file} does not exist; run \`edgeworkers db migrate\``)
  }
  // The pg driver loads only for a PostgreSQL store: a cron pass on SQLite should not pay for it.
  const db = target.backend === 'postgres' ? await (await import('./postgres/open.js')).openPostgres(target.url, settings) : openSqlite(target.file, settings)
  const clock = options.clock ?? systemClock
  return new KyselyStore(db, new StoreContext(db, {backend: target.backend, clock}, false), target.location)
}

/** The schema status, changing nothing: a SQLite file that does not exist is reported, not created. */
export async function inspectSchema(settings: Settings): Promise<{location: string; status: SchemaStatus}> {
  const target = storeTarget(settings)
  if (target.backend === 'sqlite' && !existsSync(target.file)) return {location: target.location, status: compareMigrations([])}
  const store = await openStore(settings)
  try {
    return {location: store.location, status: await store.schemaStatus()}
  } finally {
    await store.close()
  }
}

type StoreTarget = {backend: 'postgres'; url: string; location: string} | {backend: 'sqlite'; file: string; location: string}

/**
 * `store.url`: empty → `<data_dir>/edgeworkers.sqlite`; `postgres://` or `postgresql://` →
 * PostgreSQL; `sqlite:<path>` or a plain path → SQLite (relative paths are under the data dir).
 */
export function storeTarget(settings: Settings): StoreTarget {
  const url = settings.store.url.trim()
  if (/^postgres(ql)?:\/\//i.test(url)) return {backend: 'postgres', url, location: redactedUrl(url)}
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]
  if (scheme && scheme.toLowerCase() !== 'sqlite') {
    throw new KitError('config_invalid', `invalid setting store.url: unsupported scheme ${scheme}: (use a file path, sqlite:<path> or postgres://…)`)
  }
  const filePath = url === '' ? DEFAULT_SQLITE_FILE : scheme ? url.slice('sqlite:'.length).replace(/^\/\//, '') : url
  const file = path.resolve(settings.data_dir, filePath)
  return {backend: 'sqlite', file, location: file}
}

class KyselyStore implements Store {
  readonly tenants: TenantRepository
  readonly workers: WorkerRepository
  readonly outbox: OutboxRepository
  readonly audit: AuditRepository
  readonly kit: KitRepository
  readonly hosts: HostsRepository
  readonly owners: OwnersRepository
  readonly deployments: DeploymentRepository
  readonly sweeps: SweepRepository
  readonly retirements: RetirementRepository
  readonly status: StatusRepository
  readonly controlAudits: ControlAuditRepository

  constructor(
    private readonly db: Kysely<Database>,
    private readonly ctx: StoreContext,
    readonly location: string,
  ) {
    const repositories = repositoriesFor(ctx)
    this.tenants = repositories.tenants
    this.workers = repositories.workers
    this.outbox = repositories.outbox
    this.audit = repositories.audit
    this.kit = repositories.kit
    this.hosts = repositories.hosts
    this.owners = repositories.owners
    this.deployments = repositories.deployments
    this.sweeps = repositories.sweeps
    this.retirements = repositories.retirements
    this.status = repositories.status
    this.controlAudits = repositories.controlAudits
  }

  get backend(): Backend {
    return this.ctx.env.backend
  }

  get clock(): Clock {
    return this.ctx.env.clock
  }

  async transaction<T>(work: (tx: Repositories) => Promise<T>): Promise<T> {
    return this.ctx.atomic((tx) => work(repositoriesFor(tx)))
  }

  async migrate(): Promise<string[]> {
    return migrate(this.db)
  }

  async schemaStatus(): Promise<SchemaStatus> {
    return schemaStatus(this.db)
  }

  async close(): Promise<void> {
    await this.db.destroy()
  }
}

export function repositoriesFor(ctx: StoreContext): Repositories {
  return {
    tenants: new TenantRepository(ctx),
    workers: new WorkerRepository(ctx),
    outbox: new OutboxRepository(ctx),
    audit: new AuditRepository(ctx),
    kit: new KitRepository(ctx),
    hosts: new HostsRepository(ctx),
    owners: new OwnersRepository(ctx),
    deployments: new DeploymentRepository(ctx),
    sweeps: new SweepRepository(ctx),
    retirements: new RetirementRepository(ctx),
    status: new StatusRepository(ctx),
    controlAudits: new ControlAuditRepository(ctx),
  }
}

export type {Backend, Clock} from './context.js'
export {isTransientConflict} from './context.js'
export type {SchemaStatus} from './migrator.js'
export {deterministicId, newId, scriptNameFor, SCRIPT_NAME_PATTERN, TENANT_ID_PATTERN} from './ids.js'
export {AUDIT_ID_CONFLICT, auditEntry, SYSTEM_ACTOR, type AuditActor, type AuditEntryInput, type AuditListFilter} from './repositories/audit.js'
export type {GateName, PairingInput} from './repositories/kit.js'
export type {CurrentRelease, HostRelease} from './repositories/hosts.js'
// The outbox's types are the store's: its lanes and the engine name them.
export type * from './outbox/types.js'
export type {PurgeCounts} from './repositories/tenants.js'
export {controlAuditDedupeKey} from './repositories/status.js'
export type {DeploymentSnapshot} from './repositories/deployments.js'
export {DEPLOY_AUDIT_ACTIONS, DEPLOY_SUPERSEDED} from './repositories/deployments.js'
export {supersededMessage, type NewerDeploy} from './repositories/deploy-order.js'
export type {SupersededRow} from './repositories/supersede.js'
export {ORPHAN_CONFIRMATION_ACTION, type DepartmentDeletion, type OrphanCandidate} from './repositories/retirements.js'
export type {HandBack} from './repositories/sweeps.js'
export type {VersionCreateInput, WorkerCreateInput} from './repositories/workers.js'
export type {ControlClaimOptions} from './repositories/control-audits.js'
export {
  ATTENTION_OUTBOX_STATUSES,
  stampOf,
  FINISHED_OUTBOX_STATUSES,
  OPEN_OUTBOX_STATUSES,
  OUTBOX_TRANSITIONS,
  SETTLED_OUTBOX_STATUSES,
  WAITING_OUTBOX_STATUSES,
  type AttentionStatus,
  type ClaimStamp,
  type SettledOutboxStatus,
  type WaitingStatus,
} from './outbox-states.js'
export type {
  ErrorGroup,
  OldestDue,
  OutboxRowSummary,
  StatusCount,
} from './repositories/status.js'
export * from './schema.js'
export type {
  TenantRepository,
  WorkerRepository,
  OutboxRepository,
  AuditRepository,
  KitRepository,
  HostsRepository,
  OwnersRepository,
  DeploymentRepository,
  SweepRepository,
  RetirementRepository,
  StatusRepository,
  ControlAuditRepository,
}
