// Table types as Kysely sees them, plus the row shapes repositories return. Columns are the same on
// SQLite and PostgreSQL: timestamps are integer epoch milliseconds (BIGINT on PostgreSQL, parsed as
// numbers), ids are text, JSON is stored as text, booleans as 0/1 — so every statement is shared.
// Rows keep their snake_case column names; JSON columns come back parsed.
import type {Selectable} from 'kysely'

export type JsonValue = string | number | boolean | null | JsonValue[] | {[key: string]: JsonValue}
export type JsonObject = {[key: string]: JsonValue}

export const OUTBOX_OPERATIONS = ['deploy', 'artifact_cleanup', 'control_audit'] as const
export type OutboxOperation = (typeof OUTBOX_OPERATIONS)[number]

export const OUTBOX_STATUSES = ['pending', 'deferred', 'leased', 'completed', 'failed', 'uncertain', 'cancelled'] as const
export type OutboxStatus = (typeof OUTBOX_STATUSES)[number]
// Which of these are settled or finished, and the moves between them: ./outbox-states.ts.

export const VERSION_STATES = ['built', 'deploying', 'deployed', 'failed', 'uncertain', 'superseded'] as const
export type VersionState = (typeof VERSION_STATES)[number]

export interface CompaniesTable {
  id: string
  name: string
  created_at: number
  updated_at: number
}

export interface DepartmentsTable {
  id: string
  company_id: string
  name: string
  created_at: number
  updated_at: number
  deleted_at: number | null
}

export interface ServiceAccountsTable {
  id: string
  department_id: string
  name: string
  created_at: number
  updated_at: number
  deleted_at: number | null
}

export interface EdgeWorkersTable {
  id: string
  company_id: string
  department_id: string
  script_name: string
  /** Set by the deploy and retirement lanes (e.g. `active`, `paused`, `retired`). */
  status: string
  current_version_id: string | null
  /** The kit scope (`onprem:<12 hex>`) whose host serves this Worker, once deployed. */
  serving_scope: string | null
  base_revision: number
  created_at: number
  updated_at: number
  retired_at: number | null
}

export interface EdgeWorkerVersionsTable {
  id: string
  worker_id: string
  release_generation: string
  builder_policy: string
  state: VersionState
  project_artifact_key: string
  project_digest: string
  bundle_artifact_key: string
  bundle_digest: string
  /** JSON object. */
  manifest: string
  /** JSON object (the build receipt). */
  receipt: string
  created_at: number
  updated_at: number
  /** The operator's words (`deploy --message`, `rollback --message`). */
  message: string | null
  tag: string | null
  /** Who deployed it: the operator's login name. */
  author: string | null
  /** JSON object: what it was built from ({projectDir, file, kind, env}). */
  source: string | null
  /** Project archive plus bundle, in bytes. */
  size_bytes: number | null
  /** A rollback's copy: the version whose artifacts it carries. */
  rollback_of: string | null
  /** When its deploy completed (it served from then on); null: never served. */
  deployed_at: number | null
  /** JSON VersionSplit: a gradual deployment's shares; null = this version alone at 100 %. */
  split: string | null
}

export interface OutboxTable {
  id: string
  operation: OutboxOperation
  status: OutboxStatus
  dedupe_key: string
  // Copied in without foreign keys: outbox rows outlive a company hard delete, as the only evidence
  // of what was deployed.
  company_id: string | null
  department_id: string | null
  worker_id: string | null
  version_id: string | null
  script_name: string | null
  /** The kit scope the row was enqueued for; every sweep claims only its own scope. */
  dispatch_namespace: string
  /** JSON object. */
  payload: string
  /** Times the host (for a cleanup: the artifact store) was asked to act on the row; a claim alone counts none. */
  attempts: number
  /** Times in a row the row was put back to wait (host unavailable, fenced, its Worker busy): picks the next wait's backoff step. */
  waits: number
  /** The task's lease: who holds (or last held) it, its fencing token, when it runs out. */
  lease_owner: string | null
  lease_token: string | null
  lease_expires_at: number | null
  /**
   * When the row's next piece of work is due (a pending or deferred row's task; a completed
   * control_audit row's receipt acknowledgement). null = not scheduled (no sweep picks it up).
   */
  next_attempt_at: number | null
  /** A sweep's claim stamp: the runner that claimed the row and, in whole seconds, until when it holds it. */
  claimed_by: string | null
  claim_expires_at: number | null
  /** The runner that enqueued the row to dispatch it itself; it holds the row for a grace after enqueue, until a lease is first taken on it. */
  reserved_by: string | null
  last_error_code: string | null
  last_error: string | null
  created_at: number
  updated_at: number
}

export interface AuditLogsTable {
  id: string
  action: string
  resource_type: string
  resource_id: string
  actor_type: string
  actor_id: string
  auth_method: string
  result: string
  reason_code: string | null
  digest: string | null
  /** Canonical JSON object. */
  facts: string
  created_at: number
}

export interface KitPairingsTable {
  scope: string
  host_url: string
  host_fingerprint: string
  host_public_key: string
  /** Never leaves the store except through KitRepository.pairingSecret. */
  shared_secret: string
  paired_at: number
  unpaired_at: number | null
}

export interface KitFencesTable {
  id: string
  scope: string
  /** `requested` (recorded, host not yet acknowledged) → `active` (host acknowledged) → `ended`. */
  state: string
  reason: string
  ttl_seconds: number
  began_at: number
  expires_at: number
  host_acked_at: number | null
  ended_at: number | null
  end_reason: string | null
}

export interface KitGatesTable {
  scope: string
  maintenance: number
  restore_pending: number
  /** JSON object: gate name → why it was closed. */
  reasons: string
  updated_at: number
}

/** One edge host of a kit (docs/many-hosts.md). */
export interface KitHostsTable {
  /** The host's own `onprem:<12 hex>`; the kit's first host has the kit scope itself. */
  host_scope: string
  /** The kit scope the host belongs to. */
  scope: string
  host_url: string
  host_fingerprint: string
  host_public_key: string
  /** Never leaves the store except through HostsRepository.memberSecrets. */
  shared_secret: string
  /** The data plane's address as the host described it (what a load balancer targets). */
  public_url: string | null
  state: HostMemberState
  added_at: number
  removed_at: number | null
  unreachable_since: number | null
  /** Since when the host missed a change the others took; null when current. */
  behind_since: number | null
  confirmed_at: number | null
  checked_at: number | null
}

export type HostMemberState = 'active' | 'draining'

export interface KitHostReleasesTable {
  host_scope: string
  script_name: string
  release_generation: string
  ready_at: number
}

/** The owner host of a stateful Worker (migration 0011, docs/many-hosts.md). */
export interface KitWorkerOwnersTable {
  script_name: string
  scope: string
  /** The host that runs the Worker and holds its data. */
  host_scope: string
  /** The host a `worker move` is copying the data to; null when no move is under way. */
  moving_to: string | null
  move_started_at: number | null
  /** The previous owner, until its copy of the data is dropped. */
  released_from: string | null
  claimed_at: number
  updated_at: number
}

/** One row per version and asset object it serves (migration 0009); `*` = every one (a version older than the table). */
export interface EdgeWorkerVersionAssetsTable {
  version_id: string
  /** The asset's SHA-256, or `*`. */
  asset_digest: string
}

export interface Database {
  companies: CompaniesTable
  departments: DepartmentsTable
  service_accounts: ServiceAccountsTable
  edge_workers: EdgeWorkersTable
  edge_worker_versions: EdgeWorkerVersionsTable
  edge_worker_version_assets: EdgeWorkerVersionAssetsTable
  edge_worker_outbox: OutboxTable
  edge_worker_audit_logs: AuditLogsTable
  kit_pairings: KitPairingsTable
  kit_fences: KitFencesTable
  kit_gates: KitGatesTable
  kit_hosts: KitHostsTable
  kit_host_releases: KitHostReleasesTable
  kit_worker_owners: KitWorkerOwnersTable
}

export type CompanyRow = Selectable<CompaniesTable>
export type DepartmentRow = Selectable<DepartmentsTable>
export type ServiceAccountRow = Selectable<ServiceAccountsTable>
export type WorkerRow = Selectable<EdgeWorkersTable>
export type VersionRow = Omit<Selectable<EdgeWorkerVersionsTable>, 'manifest' | 'receipt' | 'source' | 'split'> & {
  manifest: JsonObject
  receipt: JsonObject
  source: JsonObject | null
  split: VersionSplit | null
}

/** A version deployed beside another (a gradual deployment): its share, and the other's. The shares add up to 100. */
export interface VersionSplit {
  percentage: number
  beside: {version_id: string; release_generation: string; percentage: number}
}
export type OutboxRow = Omit<Selectable<OutboxTable>, 'payload'> & {payload: JsonObject}
export type AuditRow = Omit<Selectable<AuditLogsTable>, 'facts'> & {facts: JsonObject}
/** A pairing as every caller sees it: the shared secret is left out. */
export type PairingRow = Omit<Selectable<KitPairingsTable>, 'shared_secret'>
export type FenceRow = Selectable<KitFencesTable>
/** A kit's host as every caller sees it: the shared secret is left out. */
export type HostMemberRow = Omit<Selectable<KitHostsTable>, 'shared_secret'>
export type WorkerOwnerRow = Selectable<KitWorkerOwnersTable>
export interface GateRow {
  scope: string
  maintenance: boolean
  restore_pending: boolean
  reasons: Record<string, string>
  updated_at: number | null
}

export function parseJsonObject(text: string): JsonObject {
  return JSON.parse(text) as JsonObject
}
