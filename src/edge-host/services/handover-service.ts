// Stateful Workers on the hosts of a kit, host side (../state/handovers.ts has the rule): hand a
// script over (stop running it), read its storage files, replace them with another host's (it runs
// here again), drop them. The kit orders these so that no two hosts ever write one Worker's data
// (docs/many-hosts.md).
import {randomUUID} from 'node:crypto'
import {existsSync} from 'node:fs'
import {mkdir, readFile, readdir, rename, rm, writeFile} from 'node:fs/promises'
import path from 'node:path'
import Database from 'better-sqlite3'
import type {Logger} from 'pino'
import {sha256Hex} from '../../canonical-json.js'
import type {Handover, ScriptData} from '../../protocol/api/handover.js'
import {HostError} from '../errors.js'
import type {WorkerdRuntime} from '../runtime/runtime.js'
import {durableObjectRoot} from '../runtime/data-dir-paths.js'
import type {HostState} from '../state/host-state.js'
import {assertScriptName} from './common.js'

/** SQLite's companions of a live database: a backup copy already holds what they add. */
const SQLITE_COMPANION = /-(wal|shm|journal)$/

export class HandoverService {
  constructor(private readonly options: {dataDir: string; state: HostState; runtime: WorkerdRuntime; log: Logger}) {}

  /** Stops running the script here; answers once its shard no longer runs it (its data is still). */
  async handOver(name: string): Promise<Handover> {
    assertScriptName(name)
    const {state, runtime, log} = this.options
    state.fences.assertNotFenced()
    const shard = state.scripts.get(name)?.shard ?? null
    if (!state.handovers.handOver(name)) return this.view(name)
    log.info({script: name}, 'script handed over to another host of the kit')
    // A crash before the swap ends is no leak: a host starting loads no handed-over script.
    if (shard !== null) await runtime.refreshShard(shard)
    return this.view(name)
  }

  async read(name: string): Promise<ScriptData> {
    this.requireHandedOver(name)
    const root = this.root(name)
    const files: ScriptData['files'] = []
    for (const file of await filesUnder(root)) {
      if (SQLITE_COMPANION.test(file)) continue
      const content = file.endsWith('.sqlite') ? await sqliteCopy(path.join(root, file)) : await readFile(path.join(root, file))
      files.push({path: file, sha256: sha256Hex(content), contentBase64: content.toString('base64')})
    }
    return {files}
  }

  /** Replaces the script's storage with `data`: staged beside it, checked, then swapped in by renames. */
  async write(name: string, data: ScriptData): Promise<Handover> {
    assertScriptName(name)
    const {state, log} = this.options
    if (state.scripts.get(name) && !state.handovers.isHandedOver(name)) {
      // It runs on an import this move made (a move run again): the old owner was fenced before that
      // copy, so the copy is final — and it may have taken writes since. Kept as it is.
      if (state.handovers.wasImported(name)) return this.view(name)
      throw new HostError('script_not_handed_over', `script ${name} runs on this host; its data is replaced only while it is handed over`)
    }
    const root = this.root(name)
    const staging = `${root}.incoming-${randomUUID()}`
    const previous = `${root}.previous-${randomUUID()}`
    try {
      for (const file of data.files) {
        const content = Buffer.from(file.contentBase64, 'base64')
        if (sha256Hex(content) !== file.sha256) throw new HostError('invalid_request', `data file ${file.path}: its content does not match its sha256`)
        await mkdir(path.dirname(path.join(staging, file.path)), {recursive: true, mode: 0o700})
        await writeFile(path.join(staging, file.path), content, {mode: 0o600})
      }
      await mkdir(staging, {recursive: true, mode: 0o700})
      if (existsSync(root)) await rename(root, previous)
      await rename(staging, root)
    } finally {
      await rm(staging, {recursive: true, force: true})
      await rm(previous, {recursive: true, force: true})
    }
    state.handovers.imported(name)
    log.info({script: name, files: data.files.length}, 'script data imported from another host of the kit')
    // It runs here from now on (with the release it holds; the kit uploads the current one next).
    const shard = state.scripts.get(name)?.shard ?? null
    if (shard !== null) await this.options.runtime.refreshShard(shard)
    return this.view(name)
  }

  /** Removes the handed-over script's storage (the new owner holds it). */
  async drop(name: string): Promise<Handover> {
    this.requireHandedOver(name)
    await rm(this.root(name), {recursive: true, force: true})
    return this.view(name)
  }

  private requireHandedOver(name: string): void {
    assertScriptName(name)
    if (!this.options.state.handovers.isHandedOver(name))
      throw new HostError('script_not_handed_over', `script ${name} is not handed over; its data is read or dropped only then`)
  }

  private root(name: string): string {
    return durableObjectRoot(this.options.dataDir, name)
  }

  private async view(name: string): Promise<Handover> {
    return {name, handedOver: this.options.state.handovers.isHandedOver(name), files: (await filesUnder(this.root(name))).length}
  }
}

/**
 * A SQLite file's whole content. Opened for writing — nothing else has it open, the script is handed
 * over — so that SQLite recovers and checkpoints a WAL the last process left (a read-only connection
 * cannot, and would read the database without its last commits).
 */
async function sqliteCopy(file: string): Promise<Buffer> {
  const db = new Database(file, {fileMustExist: true})
  try {
    db.pragma('wal_checkpoint(TRUNCATE)')
    return db.serialize()
  } finally {
    db.close()
  }
}

/** Regular files under `root`, relative to it, sorted. */
async function filesUnder(root: string): Promise<string[]> {
  if (!existsSync(root)) return []
  const entries = await readdir(root, {withFileTypes: true, recursive: true})
  return entries
    .filter((entry) => entry.isFile())
    .map((entry) => path.relative(root, path.join(entry.parentPath, entry.name)))
    .sort()
}
