// The host state's schema, as steps: HOST_MIGRATIONS[v] takes a file at `user_version` v to v + 1
// (./database.ts applies each in one transaction). Append new steps; never edit a released one — a
// host.sqlite written by any earlier build must reach the same schema as a fresh one.

export interface HostMigration {
  /** What the step adds, for the error that names a failed step. */
  name: string
  sql: string
}

export const HOST_MIGRATIONS: readonly HostMigration[] = [
  {
    name: 'scripts, control state, fences, pairing',
    sql: `
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
CREATE TABLE scripts (
  name TEXT PRIMARY KEY,
  shard INTEGER,
  release_generation TEXT,
  main_module TEXT,
  compatibility_date TEXT,
  compatibility_flags TEXT NOT NULL DEFAULT '[]',
  builder_policy TEXT,
  tags TEXT NOT NULL DEFAULT '[]',
  bindings TEXT NOT NULL DEFAULT '[]',
  content_digest TEXT,
  locked_down_at INTEGER,
  retired_at INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  policy_mode TEXT NOT NULL DEFAULT 'public',
  policy_api_key_sha256 TEXT,
  policy_api_key_last_four TEXT,
  policy_ip_allowlist TEXT NOT NULL DEFAULT '[]',
  policy_revision INTEGER NOT NULL DEFAULT 0,
  policy_updated_at INTEGER NOT NULL
) STRICT;
CREATE TABLE script_modules (
  script TEXT NOT NULL REFERENCES scripts(name),
  position INTEGER NOT NULL,
  name TEXT NOT NULL,
  type TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  size INTEGER NOT NULL,
  PRIMARY KEY (script, position)
) STRICT;
CREATE INDEX script_modules_by_sha256 ON script_modules (sha256);
CREATE TABLE module_blobs (sha256 TEXT PRIMARY KEY, content BLOB NOT NULL) STRICT;
CREATE TABLE secrets (
  script TEXT NOT NULL REFERENCES scripts(name),
  name TEXT NOT NULL,
  value TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (script, name)
) STRICT;
CREATE TABLE service_accounts (
  script TEXT NOT NULL REFERENCES scripts(name),
  id TEXT NOT NULL,
  username TEXT NOT NULL,
  password TEXT NOT NULL,
  password_sha256 TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (script, id)
) STRICT;
CREATE TABLE receipts (
  mutation_id TEXT PRIMARY KEY,
  command_digest TEXT NOT NULL,
  operation TEXT NOT NULL,
  script TEXT NOT NULL,
  result TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  acknowledged_at INTEGER
) STRICT;
CREATE TABLE fences (
  fence_id TEXT PRIMARY KEY,
  reason TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  lifted_at INTEGER,
  lift_reason TEXT
) STRICT;
CREATE INDEX fences_by_lifted_at ON fences (lifted_at);
CREATE TABLE nonces (nonce TEXT PRIMARY KEY, expires_at INTEGER NOT NULL) STRICT, WITHOUT ROWID;
`,
  },
  {
    // Runtime config and operation settings, each with its own revision per script.
    name: 'runtime config and operation settings',
    sql: `
ALTER TABLE scripts ADD COLUMN runtime_config_revision INTEGER NOT NULL DEFAULT 0;
ALTER TABLE scripts ADD COLUMN runtime_config_updated_at INTEGER;
ALTER TABLE scripts ADD COLUMN operation_settings_json TEXT;
ALTER TABLE scripts ADD COLUMN operation_settings_sha256 TEXT;
ALTER TABLE scripts ADD COLUMN operation_settings_release TEXT;
ALTER TABLE scripts ADD COLUMN operation_settings_revision INTEGER NOT NULL DEFAULT 0;
ALTER TABLE scripts ADD COLUMN operation_settings_updated_at INTEGER;
CREATE TABLE runtime_config (
  script TEXT NOT NULL REFERENCES scripts(name),
  key TEXT NOT NULL,
  value_json TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (script, key)
) STRICT;
`,
  },
  {
    // Runaway incidents per script, counted for its current release only (a deploy starts over), and
    // the quarantine they lead to (see ../runtime/watchdog.ts). IF NOT EXISTS: builds before this step
    // created the table on every open, so a version 2 file may hold it already.
    name: 'runaway incidents and quarantine',
    sql: `
CREATE TABLE IF NOT EXISTS worker_quarantine (
  script TEXT PRIMARY KEY REFERENCES scripts(name),
  release_generation TEXT NOT NULL,
  incidents INTEGER NOT NULL,
  last_incident TEXT NOT NULL,
  quarantined_at INTEGER
) STRICT;
`,
  },
  {
    // Static assets: the asset manifest of each release a script holds or may still serve (the
    // stored one and the one before it, live until the swap); the files are in <data dir>/assets.
    name: 'release assets',
    sql: `
CREATE TABLE release_assets (
  script TEXT NOT NULL REFERENCES scripts(name),
  release_generation TEXT NOT NULL,
  assets_json TEXT NOT NULL,
  PRIMARY KEY (script, release_generation)
) STRICT;
`,
  },
  {
    // Cron triggers of each script's release, and the occurrence each trigger last ran for (see
    // ../triggers/cron-scheduler.ts: what was missed while down or fenced runs once).
    name: 'cron triggers',
    sql: `
ALTER TABLE scripts ADD COLUMN crons TEXT NOT NULL DEFAULT '[]';
CREATE TABLE cron_runs (
  script TEXT NOT NULL REFERENCES scripts(name),
  cron TEXT NOT NULL,
  scheduled_at INTEGER NOT NULL,
  PRIMARY KEY (script, cron)
) STRICT;
`,
  },
  {
    // The department an upload names (the kit's id), for the `department` label of the metrics.
    name: 'release department',
    sql: 'ALTER TABLE scripts ADD COLUMN department TEXT;',
  },
  {
    // The queues each script's release consumes, with their settings (JSON, ../../protocol/api/queues.ts).
    name: 'queue consumers',
    sql: "ALTER TABLE scripts ADD COLUMN queue_consumers TEXT NOT NULL DEFAULT '[]';",
  },
  {
    // How each trigger's last finished run ended, for `edgeworkers triggers list` and status.
    name: 'cron outcomes',
    sql: 'ALTER TABLE cron_runs ADD COLUMN outcome TEXT; ALTER TABLE cron_runs ADD COLUMN outcome_scheduled_at INTEGER;',
  },
  {
    // Gradual deployments: the kit's version ids of each script's release, and the second release a
    // split keeps serving beside it, with its own modules (blobs shared by content) and share.
    name: 'gradual deployments',
    sql: `
ALTER TABLE scripts ADD COLUMN version_ids TEXT NOT NULL DEFAULT '[]';
CREATE TABLE script_splits (
  script TEXT PRIMARY KEY REFERENCES scripts(name),
  release_generation TEXT NOT NULL,
  main_module TEXT NOT NULL,
  compatibility_date TEXT NOT NULL,
  compatibility_flags TEXT NOT NULL,
  bindings TEXT NOT NULL,
  version_ids TEXT NOT NULL,
  percentage INTEGER NOT NULL
) STRICT;
CREATE TABLE split_modules (
  script TEXT NOT NULL REFERENCES scripts(name),
  position INTEGER NOT NULL,
  name TEXT NOT NULL,
  type TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  size INTEGER NOT NULL,
  PRIMARY KEY (script, position)
) STRICT;
CREATE INDEX split_modules_by_sha256 ON split_modules (sha256);
`,
  },
  {
    // Worker moves between the hosts of a kit (docs/many-hosts.md): a script handed over to another
    // host is not run here (its data plane answers 503 worker_moved) and takes no upload until its
    // data was imported here again.
    name: 'script handovers',
    sql: 'CREATE TABLE script_handovers (script TEXT PRIMARY KEY, handed_over_at INTEGER NOT NULL, imported_at INTEGER) STRICT;',
  },
]
