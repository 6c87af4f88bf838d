// This build's migrations, in order. Append new ones with a name that sorts after the last; never
// edit or remove a released one (`db migrate --check` compares applied names with this list).
import type {Migration} from 'kysely'
import * as initial from './0001_initial.js'
import * as oneOpenFence from './0002_one_open_fence.js'
import * as statusIndexes from './0003_status_indexes.js'
import * as outboxStateColumns from './0004_outbox_state_columns.js'
import * as workIndexes from './0005_work_indexes.js'
import * as outboxWaits from './0006_outbox_waits.js'
import * as versionNotes from './0007_version_notes.js'
import * as versionSplit from './0008_version_split.js'
import * as versionAssets from './0009_version_assets.js'
import * as kitHosts from './0010_kit_hosts.js'
import * as workerOwners from './0011_worker_owners.js'

export const migrations: Record<string, Migration> = {
  '0001_initial': initial,
  '0002_one_open_fence': oneOpenFence,
  '0003_status_indexes': statusIndexes,
  '0004_outbox_state_columns': outboxStateColumns,
  '0005_work_indexes': workIndexes,
  '0006_outbox_waits': outboxWaits,
  '0007_version_notes': versionNotes,
  '0008_version_split': versionSplit,
  '0009_version_assets': versionAssets,
  '0010_kit_hosts': kitHosts,
  '0011_worker_owners': workerOwners,
}
