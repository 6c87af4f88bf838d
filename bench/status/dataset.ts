// The store `bench/status` measures: OUTBOX_ROWS outbox rows and WORKERS Workers, shaped like a kit
// that has run for a month. Seeded with raw bulk INSERTs (setup, not measured) into a database the
// store has migrated, so the rows look exactly like the store's own:
// - 100 companies of WORKERS/100 departments, one Worker and one deployed version each; 50
//   departments soft-deleted with their Worker not yet retired (pending retirements);
// - one more company hard-deleted after its 100 Workers were deployed: their deploy rows remain
//   (pending orphans);
// - outbox rows over the last 30 days, 90% in the kit's scope and 10% in another kit's: 40% deploy,
//   40% artifact_cleanup, 20% control_audit; 95.5% completed, 2% cancelled, 1% pending (half due,
//   a fifth of those deferred by a fence), 0.2% leased (half expired), 0.8% failed, 0.5% uncertain,
//   over six error codes;
// - AUDIT_ROWS audit rows.
import Database from 'better-sqlite3'
import pg from 'pg'
import type {Backend} from '../../src/store/index.js'

export const SCOPE = 'onprem:0123456789ab'
const OTHER_SCOPE = 'onprem:ba9876543210'
const DAY_MS = 86_400_000
const ERROR_CODES = [
  'edge_host_unreachable',
  'edge_host_5xx',
  'worker_readiness_timeout',
  'integrity_bundle_digest',
  'worker_deleted',
  'edge_host_script_retired',
]
const ORPHAN_WORKERS = 100
const RETIRING_DEPARTMENTS = 50

export interface DatasetSize {
  outboxRows: number
  workers: number
  auditRows: number
}

type Row = Record<string, string | number | null>

/** A deterministic UUID-shaped id: the same (kind, n) always gives the same id. */
function uuid(kind: number, n: number): string {
  const hex = n.toString(16).padStart(12, '0')
  return `${kind.toString(16).padStart(8, '0')}-0000-4000-8000-${hex}`
}

/** A small deterministic PRNG (mulberry32): the same seed gives the same store on every run. */
function random(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}

const scriptName = (worker: number) => `dw-${worker.toString(16).padStart(48, '0')}`
const companyOf = (worker: number, workers: number) => (worker < workers ? `company-${Math.floor(worker / (workers / 100))}` : 'company-purged')

function* tenantRows(size: DatasetSize, now: number): Generator<[table: string, row: Row]> {
  for (let company = 0; company < 100; company++)
    yield ['companies', {id: `company-${company}`, name: `Company ${company}`, created_at: now - 60 * DAY_MS, updated_at: now - 60 * DAY_MS}]
  for (let worker = 0; worker < size.workers; worker++) {
    const created = now - 60 * DAY_MS + worker
    const retiring = worker < RETIRING_DEPARTMENTS
    yield [
      'departments',
      {
        id: `dept-${worker}`,
        company_id: companyOf(worker, size.workers),
        name: `Department ${worker}`,
        created_at: created,
        updated_at: created,
        deleted_at: retiring ? now - DAY_MS : null,
      },
    ]
    yield [
      'edge_workers',
      {
        id: uuid(1, worker),
        company_id: companyOf(worker, size.workers),
        department_id: `dept-${worker}`,
        script_name: scriptName(worker),
        status: retiring ? 'retiring' : 'active',
        current_version_id: uuid(2, worker),
        serving_scope: SCOPE,
        base_revision: 0,
        created_at: created,
        updated_at: created,
        retired_at: null,
      },
    ]
    yield [
      'edge_worker_versions',
      {
        id: uuid(2, worker),
        worker_id: uuid(1, worker),
        release_generation: `rg-${worker}`,
        builder_policy: 'department-worker-project-v2.9',
        state: 'deployed',
        project_artifact_key: `project/${worker}`,
        project_digest: '0'.repeat(64),
        bundle_artifact_key: `bundle/${worker}`,
        bundle_digest: '0'.repeat(64),
        manifest: '{}',
        receipt: '{}',
        created_at: created,
        updated_at: created,
      },
    ]
  }
}

function outboxRow(n: number, size: DatasetSize, now: number, next: () => number): Row {
  const scope = next() < 0.9 ? SCOPE : OTHER_SCOPE
  const operation = n % 10 < 4 ? 'deploy' : n % 10 < 8 ? 'artifact_cleanup' : 'control_audit'
  const roll = next()
  const status =
    roll < 0.955 ? 'completed' : roll < 0.975 ? 'cancelled' : roll < 0.985 ? 'pending' : roll < 0.987 ? 'leased' : roll < 0.995 ? 'failed' : 'uncertain'
  const created = now - Math.floor(next() * 30 * DAY_MS)
  const updated = Math.min(now, created + Math.floor(next() * DAY_MS))
  // Deploy rows name a Worker; one in 100 names a Worker of the purged company (an orphan).
  const worker = operation !== 'deploy' ? null : n % 100 === 0 ? size.workers + (Math.floor(n / 100) % ORPHAN_WORKERS) : n % size.workers
  const errorCode =
    status === 'failed' || status === 'uncertain'
      ? ERROR_CODES[Math.floor(next() * ERROR_CODES.length)]!
      : status === 'pending' && operation === 'deploy' && next() < 0.2
        ? 'edge_host_fenced'
        : null
  const leased = status === 'leased'
  const due = status === 'pending' ? (next() < 0.5 ? now - Math.floor(next() * 3_600_000) : now + Math.floor(next() * 3_600_000)) : null
  return {
    id: uuid(3, n),
    operation,
    // A pending deploy held by a fence is deferred (and says why in its error code).
    status: errorCode === 'edge_host_fenced' ? 'deferred' : status,
    dedupe_key: `${operation}:${n}`,
    company_id: worker === null ? null : companyOf(worker, size.workers),
    department_id: worker === null ? null : `dept-${worker}`,
    worker_id: worker === null ? null : uuid(1, worker),
    version_id: worker === null ? null : uuid(2, worker),
    script_name: worker === null ? null : scriptName(worker),
    dispatch_namespace: scope,
    payload:
      operation === 'artifact_cleanup'
        ? `{"digest":"${'0'.repeat(64)}","kind":"bundle","object_key":"bundle/${n}"}`
        : `{"baseRevision":0,"releaseGeneration":"rg-${n}"}`,
    attempts: status === 'completed' ? 1 : 1 + Math.floor(next() * 12),
    lease_owner: leased ? `runner-${n % 4}` : null,
    lease_token: leased ? uuid(4, n) : null,
    lease_expires_at: leased ? now + (next() < 0.5 ? -1 : 1) * Math.floor(next() * 90_000) : null,
    next_attempt_at: due,
    last_error_code: errorCode,
    last_error: errorCode ? `bench ${errorCode}` : null,
    created_at: created,
    updated_at: updated,
  }
}

function auditRow(n: number, now: number): Row {
  const created = now - Math.floor(((n + 1) / 100_000) * 30 * DAY_MS)
  return {
    id: uuid(5, n),
    action: n % 3 === 0 ? 'department.worker_retired' : n % 3 === 1 ? 'service_account.deleted' : 'secrets.purged_before_legacy_deploy',
    resource_type: 'edge_worker',
    resource_id: uuid(1, n % 10_000),
    actor_type: 'system',
    actor_id: '',
    auth_method: 'system',
    result: 'success',
    reason_code: SCOPE,
    digest: null,
    facts: `{"n":${n}}`,
    created_at: created,
  }
}

/** Fills a migrated, empty store at `url` (a SQLite file or a PostgreSQL URL). */
export async function fillDataset(backend: Backend, url: string, size: DatasetSize, now: number): Promise<void> {
  const next = random(20261130)
  const rows = function* (): Generator<[string, Row]> {
    yield* tenantRows(size, now)
    for (let n = 0; n < size.outboxRows; n++) yield ['edge_worker_outbox', outboxRow(n, size, now, next)]
    for (let n = 0; n < size.auditRows; n++) yield ['edge_worker_audit_logs', auditRow(n, now)]
  }
  if (backend === 'sqlite') fillSqlite(url, rows())
  else await fillPostgres(url, rows())
}

function fillSqlite(file: string, rows: Iterable<[string, Row]>): void {
  const db = new Database(file)
  db.pragma('synchronous = OFF')
  const statements = new Map<string, Database.Statement>()
  db.exec('begin')
  for (const [table, row] of rows) {
    let insert = statements.get(table)
    if (!insert) {
      const columns = Object.keys(row)
      insert = db.prepare(`insert into ${table} (${columns.join(', ')}) values (${columns.map((column) => `@${column}`).join(', ')})`)
      statements.set(table, insert)
    }
    insert.run(row)
  }
  db.exec('commit')
  db.exec('analyze')
  db.close()
}

/** Multi-row INSERTs of 1,000 rows per statement, in one transaction; then ANALYZE and VACUUM (as autovacuum would). */
async function fillPostgres(url: string, rows: Iterable<[string, Row]>): Promise<void> {
  const client = new pg.Client({connectionString: url})
  await client.connect()
  try {
    await client.query('begin')
    let batch: Row[] = []
    let batchTable = ''
    const flush = async () => {
      if (batch.length === 0) return
      const columns = Object.keys(batch[0]!)
      const values: Array<string | number | null> = []
      const tuples = batch.map((row) => `(${columns.map((column) => `$${values.push(row[column]!)}`).join(', ')})`)
      await client.query(`insert into ${batchTable} (${columns.join(', ')}) values ${tuples.join(', ')}`, values)
      batch = []
    }
    for (const [table, row] of rows) {
      if (table !== batchTable || batch.length === 1_000) {
        await flush()
        batchTable = table
      }
      batch.push(row)
    }
    await flush()
    await client.query('commit')
    await client.query('vacuum analyze')
  } finally {
    await client.end()
  }
}
