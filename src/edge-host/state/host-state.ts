// Host state: one SQLite file in the data dir (./database.ts), read and written through
// repositories named by what they hold — scripts, credentials, control config, receipts, fences,
// pairing, quarantine. The host process is the only writer except `host pairing-code --rotate`,
// which touches pairing rows.
//
// The fence rule lives in ./fences.ts: every change of scripts or control state takes a
// FencedTx, and the write paths below are the only places that open one.
import path from 'node:path'
import type {ControlMeta, ReceiptOperation} from '../../protocol/management-api.js'
import {ensurePrivateFile} from '../../util/private-files.js'
import {HostError} from '../errors.js'
import {ControlConfig} from './control-config.js'
import {CronRuns} from './cron-runs.js'
import {Credentials} from './credentials.js'
import {HostDatabase} from './database.js'
import {Fences, type FencedTx} from './fences.js'
import {Pairing} from './pairing.js'
import {Handovers} from './handovers.js'
import {Quarantine} from './quarantine.js'
import {Receipts} from './receipts.js'
import {ReleaseAssetsRepository} from './release-assets.js'
import {Scripts, type ScriptUpload} from './scripts.js'

export type {AccessPolicyRecord, OperationSettingsRecord} from './control-config.js'
export type {FencedTx} from './fences.js'
export type {HostFence} from '../../protocol/management-api.js'
export {sealSnapshotCopy} from './fences.js'
export {type ScriptRecord, type ScriptUpload, scriptStateOf} from './scripts.js'

export const STATE_FILE = 'host.sqlite'

export class HostState {
  readonly credentials: Credentials
  readonly controlConfig: ControlConfig
  readonly scripts: Scripts
  readonly receipts: Receipts
  readonly fences: Fences
  readonly pairing: Pairing
  readonly quarantine: Quarantine
  readonly handovers: Handovers
  readonly releaseAssets: ReleaseAssetsRepository
  readonly cronRuns: CronRuns

  /** Told of every control call: applied now, or answered from an earlier receipt (the host's metrics). */
  onControl?: (operation: ReceiptOperation, outcome: 'applied' | 'replayed') => void

  private constructor(private readonly db: HostDatabase) {
    this.credentials = new Credentials(db)
    this.controlConfig = new ControlConfig(db)
    this.scripts = new Scripts(db, this.credentials, this.controlConfig)
    this.receipts = new Receipts(db)
    this.fences = new Fences(db)
    this.pairing = new Pairing(db)
    this.quarantine = new Quarantine(db)
    this.handovers = new Handovers(db)
    this.releaseAssets = new ReleaseAssetsRepository(db)
    this.cronRuns = new CronRuns(db)
  }

  static open(dataDir: string): HostState {
    const file = path.join(dataDir, STATE_FILE)
    ensurePrivateFile(file) // pairing secret, Worker secrets, service-account passwords
    return new HostState(HostDatabase.open(file))
  }

  close(): void {
    this.db.close()
  }

  /** A consistent copy of the state in `file` (writers keep going); see sealSnapshotCopy. */
  backupTo(file: string): Promise<void> {
    return this.db.backupTo(file)
  }

  // ── What the two listeners read on every request ────────────────────────────────────────────

  route(name: string) {
    return this.scripts.route(name)
  }

  pairingSecret(): string | null {
    return this.pairing.secret()
  }

  get nonces() {
    return this.pairing.nonces
  }

  // ── The fenced write paths ──────────────────────────────────────────────────────────────────

  /** Stores an upload (see Scripts.save): the shard to restart, or null when nothing changed. */
  saveUpload(name: string, upload: ScriptUpload, shards: {count: number; maxScriptsPerShard: number}): number | null {
    return this.fencedWrite((tx) => {
      const previous = this.scripts.get(name)?.releaseGeneration ?? null
      const shard = this.scripts.save(tx, name, upload, shards)
      // In the upload's transaction: a release is never stored without its assets.
      if (shard !== null) this.releaseAssets.save(tx, name, upload.releaseGeneration, [previous, upload.split?.releaseGeneration ?? null], upload.assets)
      return shard
    })
  }

  retire(name: string): void {
    this.fencedWrite((tx) => this.scripts.retire(tx, name))
  }

  acknowledgeReceipt(mutationId: string): boolean {
    return this.fencedWrite((tx) => this.receipts.acknowledge(tx, mutationId))
  }

  /**
   * Runs one control mutation of a live script: fence and retirement checks, the change, and — when
   * the caller sent a mutation id — its receipt, all in one transaction. A repeated mutation id
   * returns the stored result without applying anything, fenced or not.
   */
  control<T extends Record<string, unknown>>(name: string, operation: ReceiptOperation, meta: ControlMeta, apply: (tx: FencedTx) => T): T {
    return this.db.write((writeTx) => {
      if (meta.mutationId !== undefined) {
        const earlier = this.receipts.get(meta.mutationId)
        if (earlier) {
          if (earlier.commandDigest !== meta.commandDigest || earlier.operation !== operation || earlier.scriptName !== name) {
            throw new HostError('mutation_conflict', `mutation ${meta.mutationId} was already applied with different facts`)
          }
          this.onControl?.(operation, 'replayed')
          // Same operation, same command: the stored result is what `apply` returned the first time.
          return earlier.result as T
        }
      }
      const tx = this.fences.guard(writeTx)
      if (!this.scripts.get(name)) throw new HostError('script_not_found', `script ${name} does not exist on this host`)
      this.scripts.assertNotRetired(name)
      const result = apply(tx)
      if (meta.mutationId !== undefined) {
        this.receipts.record(tx, {mutationId: meta.mutationId, commandDigest: meta.commandDigest!, operation, scriptName: name, result})
      }
      this.onControl?.(operation, 'applied')
      return result
    })
  }

  /** Replaces a live script's whole control state (a copy from another host of its kit): fenced, no receipt. */
  replaceControl(name: string, apply: (tx: FencedTx) => void): void {
    this.fencedWrite((tx) => {
      if (!this.scripts.get(name)) throw new HostError('script_not_found', `script ${name} does not exist on this host`)
      this.scripts.assertNotRetired(name)
      apply(tx)
    })
  }

  private fencedWrite<T>(work: (tx: FencedTx) => T): T {
    return this.db.write((tx) => work(this.fences.guard(tx)))
  }
}
