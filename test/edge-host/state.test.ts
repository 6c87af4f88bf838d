// The host state file on its own (no host process): the fence rule holds on every write path, and a
// host.sqlite of every earlier schema version upgrades in place, keeping its data; one written by a
// newer build is refused.
import {chmodSync, mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import Database from 'better-sqlite3'
import {afterEach, beforeEach, describe, expect, expectTypeOf, test} from 'vitest'
import {sha256Hex} from '../../src/canonical-json.js'
import {KitError} from '../../src/errors.js'
import {HostError} from '../../src/edge-host/errors.js'
import {type FencedTx, HostState, STATE_FILE, type ScriptUpload} from '../../src/edge-host/state/host-state.js'
import type {WriteTx} from '../../src/edge-host/state/database.js'
import {HOST_MIGRATIONS} from '../../src/edge-host/state/migrations.js'
import {runCli} from '../support/cli.js'
import {scriptNameFor, stateUpload} from '../support/worker-fixtures.js'

let dataDir: string
let file: string

beforeEach(() => {
  dataDir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-host-state-'))
  file = path.join(dataDir, STATE_FILE)
})

afterEach(() => {
  rmSync(dataDir, {recursive: true, force: true})
})

const name = scriptNameFor('state/fenced')
const shards = {count: 2, maxScriptsPerShard: 10}

function upload(text: string): ScriptUpload {
  return stateUpload(text, `export default {fetch() {return new Response(${JSON.stringify(text)})}}`)
}

/** Every row of every table, read through a connection of its own. */
function contents(): Record<string, unknown[]> {
  const db = new Database(file, {readonly: true})
  try {
    const tables = db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`).pluck().all() as string[]
    return Object.fromEntries(tables.map((table) => [table, db.prepare(`SELECT * FROM ${table} ORDER BY 1, 2`).all()]))
  } finally {
    db.close()
  }
}

function userVersion(): number {
  const db = new Database(file, {readonly: true})
  try {
    return db.pragma('user_version', {simple: true}) as number
  } finally {
    db.close()
  }
}

function refusal(attempt: () => unknown): unknown {
  try {
    attempt()
  } catch (error) {
    return error
  }
  return undefined
}

/** The repository methods that take a FencedTx: the compiler makes the test below name every one. */
type FencedMutators<Repository> = {
  [Method in keyof Repository]: Repository[Method] extends (...args: infer Args) => unknown
    ? Args extends [infer First, ...unknown[]]
      ? [First] extends [FencedTx]
        ? Method
        : never
      : never
    : never
}[keyof Repository]
type Attempts = {
  [Repository in 'scripts' | 'credentials' | 'controlConfig' | 'receipts']: Record<FencedMutators<HostState[Repository]>, (tx: FencedTx) => unknown>
}

describe('the fence rule', () => {
  test('a plain write transaction, or anything shaped like one, is not a fenced one', () => {
    expectTypeOf<WriteTx>().not.toExtend<FencedTx>()
    expectTypeOf<{now: number; run: FencedTx['run']}>().not.toExtend<FencedTx>()
  })

  test('while a fence is active every write path is refused and changes nothing; lifted, each applies', () => {
    const state = HostState.open(dataDir)
    try {
      expect(state.saveUpload(name, upload('one'), shards)).not.toBeNull()
      state.control(name, 'secrets.put', {mutationId: 'm-1', commandDigest: sha256Hex('put')}, (tx) => ({
        current: state.credentials.putSecret(tx, name, 'TOKEN', 'value'),
      }))
      const applied: string[] = []
      const attempts: Attempts = {
        scripts: {
          save: (tx) => state.scripts.save(tx, name, upload('two'), shards),
          lockDown: (tx) => state.scripts.lockDown(tx, name),
          retire: (tx) => state.scripts.retire(tx, scriptNameFor('state/other')),
        },
        credentials: {
          putSecret: (tx) => state.credentials.putSecret(tx, name, 'OTHER', 'x'),
          deleteSecret: (tx) => state.credentials.deleteSecret(tx, name, 'OTHER'),
          purgeSecrets: (tx) => state.credentials.purgeSecrets(tx, name),
          putServiceAccount: (tx) => state.credentials.putServiceAccount(tx, name, 'sa-1', {username: 'u', password: 'p'}),
          deleteServiceAccount: (tx) => state.credentials.deleteServiceAccount(tx, name, 'sa-1'),
          purgeServiceAccounts: (tx) => state.credentials.purgeServiceAccounts(tx, name),
          replaceAll: (tx) => state.credentials.replaceAll(tx, name, {secrets: [{name: 'COPIED', value: 'x'}], serviceAccounts: []}),
        },
        controlConfig: {
          replacePolicy: (tx) =>
            state.controlConfig.replacePolicy(tx, name, {mode: 'teamsync_internal', apiKeySha256: null, apiKeyLastFour: null, ipAllowlist: []}),
          rotateApiKey: (tx) =>
            state.controlConfig.rotateApiKey(tx, name, {
              apiKeySha256: sha256Hex('key'),
              apiKeyLastFour: 'abcd',
              baseRevision: state.controlConfig.policy(name).revision,
            }),
          revokeApiKey: (tx) => state.controlConfig.revokeApiKey(tx, name, state.controlConfig.policy(name).revision),
          putRuntimeConfig: (tx) =>
            state.controlConfig.putRuntimeConfig(tx, name, 'limit', {
              valueJson: '{"b":1,"a":2}',
              baseRevision: state.controlConfig.runtimeConfigRevision(name).revision,
            }),
          deleteRuntimeConfig: (tx) => state.controlConfig.deleteRuntimeConfig(tx, name, 'limit', state.controlConfig.runtimeConfigRevision(name).revision),
          replaceOperationSettings: (tx) =>
            state.controlConfig.replaceOperationSettings(tx, name, {
              releaseGeneration: state.scripts.get(name)!.releaseGeneration!,
              settingsJson: '{}',
              baseRevision: state.controlConfig.operationSettings(name).revision,
            }),
          revokeOperationSettings: (tx) => state.controlConfig.revokeOperationSettings(tx, name, state.controlConfig.operationSettings(name).revision),
          replaceAll: (tx) =>
            state.controlConfig.replaceAll(tx, name, {
              accessPolicy: {mode: 'public', apiKeySha256: null, apiKeyLastFour: null, ipAllowlist: [], revision: 9},
              runtimeConfig: {revision: 9, entries: [{key: 'copied', valueJson: '{}'}]},
              operationSettings: {settingsJson: null, releaseGeneration: null, revision: 9},
            }),
        },
        receipts: {
          record: (tx) =>
            state.receipts.record(tx, {mutationId: 'm-2', commandDigest: sha256Hex('record'), operation: 'secrets.purge', scriptName: name, result: {}}),
          acknowledge: (tx) => state.receipts.acknowledge(tx, 'm-1'),
        },
      }
      const mutators = Object.values(attempts).flatMap((repository) => Object.entries<(tx: FencedTx) => unknown>(repository))
      /** Every public path that opens a fenced write: each control call with each mutator, and the three others. */
      const writePaths: Array<[string, () => unknown]> = [
        ...mutators.map(([method, mutate]): [string, () => unknown] => [
          `control → ${method}`,
          () => state.control(name, 'secrets.put', {}, (tx) => (applied.push(method), {result: mutate(tx) ?? null})),
        ]),
        ['saveUpload', () => state.saveUpload(scriptNameFor('state/new'), upload('new'), shards)],
        ['retire', () => state.retire(name)],
        ['acknowledgeReceipt', () => state.acknowledgeReceipt('m-1')],
      ]

      state.fences.begin('backup-1', 600, 'test')
      const before = contents()
      for (const [path, write] of writePaths) {
        const error = refusal(write)
        expect(error, path).toBeInstanceOf(HostError)
        expect((error as HostError).code, path).toBe('edge_host_fenced')
      }
      expect(applied).toEqual([])
      expect(contents()).toEqual(before)

      state.fences.end('backup-1')
      for (const [path, write] of writePaths) expect(refusal(write), path).toBeUndefined()
      expect(applied).toEqual(mutators.map(([method]) => method))
      expect(state.scripts.get(name)?.retiredAt).not.toBeNull()
      expect(state.receipts.get('m-1')?.acknowledgedAt).not.toBeNull()
    } finally {
      state.close()
    }
  })

  test('a fenced transaction kept past its work is refused', () => {
    const state = HostState.open(dataDir)
    try {
      state.saveUpload(name, upload('one'), shards)
      let kept: FencedTx | undefined
      state.control(name, 'secrets.purge', {}, (tx) => ((kept = tx), {}))
      expect(() => state.credentials.putSecret(kept!, name, 'LATE', 'x')).toThrow('a write transaction was used after it ended')
      expect(state.credentials.secrets(name)).toEqual([])
    } finally {
      state.close()
    }
  })
})

// The schema as the builds before versioned migrations wrote it: version 1, and version 2 (which also
// created worker_quarantine on every open).
const V1_SCHEMA = `
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
CREATE TABLE scripts (
  name TEXT PRIMARY KEY, shard INTEGER, release_generation TEXT, main_module TEXT, compatibility_date TEXT,
  compatibility_flags TEXT NOT NULL DEFAULT '[]', builder_policy TEXT, tags TEXT NOT NULL DEFAULT '[]',
  bindings TEXT NOT NULL DEFAULT '[]', content_digest TEXT, locked_down_at INTEGER, retired_at INTEGER,
  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, policy_mode TEXT NOT NULL DEFAULT 'public',
  policy_api_key_sha256 TEXT, policy_api_key_last_four TEXT, policy_ip_allowlist TEXT NOT NULL DEFAULT '[]',
  policy_revision INTEGER NOT NULL DEFAULT 0, policy_updated_at INTEGER NOT NULL
) STRICT;
CREATE TABLE script_modules (
  script TEXT NOT NULL REFERENCES scripts(name), position INTEGER NOT NULL, name TEXT NOT NULL, type TEXT NOT NULL,
  sha256 TEXT NOT NULL, size INTEGER NOT NULL, PRIMARY KEY (script, position)
) STRICT;
CREATE INDEX script_modules_by_sha256 ON script_modules (sha256);
CREATE TABLE module_blobs (sha256 TEXT PRIMARY KEY, content BLOB NOT NULL) STRICT;
CREATE TABLE secrets (
  script TEXT NOT NULL REFERENCES scripts(name), name TEXT NOT NULL, value TEXT NOT NULL, sha256 TEXT NOT NULL,
  updated_at INTEGER NOT NULL, PRIMARY KEY (script, name)
) STRICT;
CREATE TABLE service_accounts (
  script TEXT NOT NULL REFERENCES scripts(name), id TEXT NOT NULL, username TEXT NOT NULL, password TEXT NOT NULL,
  password_sha256 TEXT NOT NULL, updated_at INTEGER NOT NULL, PRIMARY KEY (script, id)
) STRICT;
CREATE TABLE receipts (
  mutation_id TEXT PRIMARY KEY, command_digest TEXT NOT NULL, operation TEXT NOT NULL, script TEXT NOT NULL,
  result TEXT NOT NULL, created_at INTEGER NOT NULL, acknowledged_at INTEGER
) STRICT;
CREATE TABLE fences (
  fence_id TEXT PRIMARY KEY, reason TEXT NOT NULL, started_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,
  lifted_at INTEGER, lift_reason TEXT
) STRICT;
CREATE INDEX fences_by_lifted_at ON fences (lifted_at);
CREATE TABLE nonces (nonce TEXT PRIMARY KEY, expires_at INTEGER NOT NULL) STRICT, WITHOUT ROWID;
PRAGMA user_version = 1;
`

const V2_UPGRADE = `
ALTER TABLE scripts ADD COLUMN runtime_config_revision INTEGER NOT NULL DEFAULT 0;
ALTER TABLE scripts ADD COLUMN runtime_config_updated_at INTEGER;
ALTER TABLE scripts ADD COLUMN operation_settings_json TEXT;
ALTER TABLE scripts ADD COLUMN operation_settings_sha256 TEXT;
ALTER TABLE scripts ADD COLUMN operation_settings_release TEXT;
ALTER TABLE scripts ADD COLUMN operation_settings_revision INTEGER NOT NULL DEFAULT 0;
ALTER TABLE scripts ADD COLUMN operation_settings_updated_at INTEGER;
CREATE TABLE runtime_config (
  script TEXT NOT NULL REFERENCES scripts(name), key TEXT NOT NULL, value_json TEXT NOT NULL, sha256 TEXT NOT NULL,
  updated_at INTEGER NOT NULL, PRIMARY KEY (script, key)
) STRICT;
CREATE TABLE IF NOT EXISTS worker_quarantine (
  script TEXT PRIMARY KEY REFERENCES scripts(name), release_generation TEXT NOT NULL, incidents INTEGER NOT NULL,
  last_incident TEXT NOT NULL, quarantined_at INTEGER
) STRICT;
PRAGMA user_version = 2;
`

const V1_DATA = `
INSERT INTO meta VALUES ('pairing_secret', 'paired-secret');
INSERT INTO scripts (name, shard, release_generation, main_module, compatibility_date, bindings, content_digest, created_at, updated_at,
  policy_mode, policy_api_key_sha256, policy_api_key_last_four, policy_revision, policy_updated_at)
  VALUES ('${name}', 1, 'gen-1', 'index.js', '2025-01-01', '[{"type":"plain_text","name":"GREETING","text":"hi"}]', 'digest', 1000, 2000,
  'api_key', '${sha256Hex('key')}', 'abcd', 3, 2000);
INSERT INTO module_blobs VALUES ('${sha256Hex('code')}', X'636f6465');
INSERT INTO script_modules VALUES ('${name}', 0, 'index.js', 'esModule', '${sha256Hex('code')}', 4);
INSERT INTO secrets VALUES ('${name}', 'TOKEN', 's3cret', '${sha256Hex('s3cret')}', 1500);
INSERT INTO service_accounts VALUES ('${name}', 'sa-1', 'user', 'pw', '${sha256Hex('pw')}', 1500);
INSERT INTO receipts VALUES ('m-1', '${sha256Hex('put')}', 'secrets.put', '${name}', '{"conflict":false}', 1500, NULL);
INSERT INTO fences VALUES ('backup-1', 'nightly', 100, 200, 150, 'ended');
`

function writeOldState(sql: string): void {
  const db = new Database(file)
  db.exec(sql)
  db.close()
  chmodSync(file, 0o600) // the host refuses a state file others may read
}

function expectV1DataKept(state: HostState): void {
  const script = state.scripts.get(name)!
  expect(script).toMatchObject({releaseGeneration: 'gen-1', shard: 1, bindings: [{type: 'plain_text', name: 'GREETING', text: 'hi'}]})
  expect(script.policy).toMatchObject({mode: 'api_key', apiKeyLastFour: 'abcd', revision: 3})
  expect(state.scripts.moduleContent(sha256Hex('code')).toString()).toBe('code')
  expect(state.scripts.runnable(script)).toMatchObject({
    secrets: [{name: 'TOKEN', value: 's3cret'}],
    serviceAccounts: [{id: 'sa-1', username: 'user', password: 'pw'}],
    runtimeConfig: [],
    operationSettingsJson: null,
  })
  expect(state.receipts.get('m-1')).toMatchObject({operation: 'secrets.put', result: {conflict: false}})
  expect(state.fences.recent()).toMatchObject([{fenceId: 'backup-1', liftReason: 'ended'}])
  expect(state.pairingSecret()).toBe('paired-secret')
  expect(state.controlConfig.runtimeConfigRevision(name)).toEqual({revision: 0, updatedAt: 1000})
  expect(state.controlConfig.operationSettings(name)).toMatchObject({settingsJson: null, revision: 0, updatedAt: 1000})
}

describe('host.sqlite migrations', () => {
  test('a fresh file gets every step', () => {
    HostState.open(dataDir).close()
    expect(userVersion()).toBe(HOST_MIGRATIONS.length)
  })

  test('a version 1 file upgrades in place and keeps its data; the upgraded state works', () => {
    writeOldState(V1_SCHEMA + V1_DATA)
    const state = HostState.open(dataDir)
    try {
      expect(userVersion()).toBe(HOST_MIGRATIONS.length)
      expectV1DataKept(state)
      expect(state.quarantine.recordIncident(name, 'cpu', 1)).toEqual({incidents: 1, quarantined: true})
      expect(state.scripts.route(name)).toMatchObject({quarantined: true})
    } finally {
      state.close()
    }
  })

  test('a version 2 file (with the quarantine table its build created on open) upgrades and keeps its data', () => {
    writeOldState(
      `${V1_SCHEMA}${V1_DATA}${V2_UPGRADE}
      UPDATE scripts SET runtime_config_revision = 1, runtime_config_updated_at = 3000, operation_settings_json = '{}', operation_settings_revision = 2;
      INSERT INTO runtime_config VALUES ('${name}', 'limit', '{"a":1}', '${sha256Hex('{"a":1}')}', 3000);
      INSERT INTO worker_quarantine VALUES ('${name}', 'gen-1', 3, 'cpu', 4000);`,
    )
    const state = HostState.open(dataDir)
    try {
      expect(userVersion()).toBe(HOST_MIGRATIONS.length)
      expect(state.controlConfig.runtimeConfig(name)).toEqual([{key: 'limit', valueJson: '{"a":1}', sha256: sha256Hex('{"a":1}'), updatedAt: 3000}])
      expect(state.controlConfig.operationSettings(name)).toMatchObject({settingsJson: '{}', revision: 2})
      expect(state.quarantine.scripts()).toEqual([{script: name, releaseGeneration: 'gen-1', incidents: 3, lastIncident: 'cpu', quarantinedAt: 4000}])
      expect(state.credentials.secrets(name)).toEqual([{name: 'TOKEN', sha256: sha256Hex('s3cret'), updatedAt: 1500}])
    } finally {
      state.close()
    }
  })

  test('a step that fails leaves the file at the version before it, with nothing of the step applied', () => {
    // runtime_config already there: step 2 fails on its last statement, after its ALTERs ran.
    writeOldState(`${V1_SCHEMA}${V1_DATA}CREATE TABLE runtime_config (script TEXT);`)
    const error = refusal(() => HostState.open(dataDir))
    expect(error).toBeInstanceOf(KitError)
    expect(error).toMatchObject({code: 'store_unavailable'})
    expect((error as KitError).message).toMatch(
      /host state migration to version 2 \(runtime config and operation settings\) failed: table runtime_config already exists$/,
    )
    expect(userVersion()).toBe(1)
    const db = new Database(file, {readonly: true})
    const columns = db.prepare('SELECT name FROM pragma_table_info(?)').pluck().all('scripts')
    db.close()
    expect(columns).not.toContain('runtime_config_revision')
  })

  test('a file written by a newer build is refused with one line (exit 4) and left as it is', async () => {
    HostState.open(dataDir).close()
    const newer = HOST_MIGRATIONS.length + 1
    writeOldState(`PRAGMA user_version = ${newer}`)
    const error = refusal(() => HostState.open(dataDir))
    expect(error).toMatchObject({code: 'schema_mismatch'})
    expect((error as KitError).message).toBe(
      `${file} has host state schema version ${newer}, newer than this build's ${HOST_MIGRATIONS.length}; upgrade edgeworkers`,
    )

    const cli = await runCli(['host', 'pairing-code', '--data-dir', dataDir])
    expect(cli.code).toBe(4)
    expect(cli.stderr.trim().split('\n')).toHaveLength(1)
    expect(cli.stderr).toContain(`host state schema version ${newer}`)
    expect(userVersion()).toBe(newer)
  })
})
