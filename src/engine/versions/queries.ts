// `versions list|show`: what each version of a Worker says about itself — the operator's notes
// (message, tag, author), where it was built from, its size, its state and digests — read from
// the version rows alone, so a version whose artifacts were cleaned up is still listed.
import type {VersionRow, WorkerRow} from '../../store/index.js'
import type {Engine} from '../context.js'
import {DIGEST_NAMES, type DigestName} from '../project/version-digests.js'
import {findWorker} from '../workers.js'
import {namedVersion} from './names.js'

export interface VersionSummary {
  id: string
  createdAt: number
  message: string | null
  tag: string | null
  author: string | null
  state: VersionRow['state']
  /** The version the Worker serves (its current version). */
  current: boolean
  releaseGeneration: string
  builderPolicy: string
  /** Project archive plus bundle, in bytes; null for versions built before it was recorded. */
  sizeBytes: number | null
  /** What it was built from: {projectDir, file, kind, env}. */
  source: VersionRow['source']
  /** A rollback's copy: the version whose artifacts it carries. */
  rollbackOf: string | null
  /** When its deploy completed; null: it never served. */
  deployedAt: number | null
}

export interface VersionDetails extends VersionSummary {
  digests: Record<DigestName, string | null>
  compatibilityDate: string | null
  compatibilityFlags: string[]
  /** The modules in module-tuple order (main first) with the SHA-256 of their content. */
  modules: Array<{name: string; sha256: string}>
}

export interface VersionList {
  workerId: string
  scriptName: string
  departmentId: string
  /** Oldest first. */
  versions: VersionSummary[]
}

export async function listWorkerVersions(engine: Engine, handle: string): Promise<VersionList> {
  const worker = await findWorker(engine, handle)
  const versions = await engine.store.workers.listVersions(worker.id)
  return {workerId: worker.id, scriptName: worker.script_name, departmentId: worker.department_id, versions: versions.map((row) => summaryOf(worker, row))}
}

/** The version `name` (id, unique prefix or tag) of the Worker `handle` names. */
export async function showWorkerVersion(engine: Engine, handle: string, name: string): Promise<VersionDetails> {
  const worker = await findWorker(engine, handle)
  return detailsOf(worker, namedVersion(await engine.store.workers.listVersions(worker.id), name))
}

export function summaryOf(worker: WorkerRow, row: VersionRow): VersionSummary {
  return {
    id: row.id,
    createdAt: row.created_at,
    message: row.message,
    tag: row.tag,
    author: row.author,
    state: row.state,
    current: worker.current_version_id === row.id,
    releaseGeneration: row.release_generation,
    builderPolicy: row.builder_policy,
    sizeBytes: row.size_bytes === null ? null : Number(row.size_bytes),
    source: row.source,
    rollbackOf: row.rollback_of,
    deployedAt: row.deployed_at === null ? null : Number(row.deployed_at),
  }
}

function detailsOf(worker: WorkerRow, row: VersionRow): VersionDetails {
  const receipt = row.receipt as Record<string, unknown>
  const manifest = row.manifest as {compatibilityDate?: string; compatibilityFlags?: string[]}
  const digests = Object.fromEntries(DIGEST_NAMES.map((name) => [name, typeof receipt[name] === 'string' ? receipt[name] : null])) as Record<
    DigestName,
    string | null
  >
  return {
    ...summaryOf(worker, row),
    digests: {...digests, projectDigest: row.project_digest, bundleDigest: row.bundle_digest},
    compatibilityDate: manifest.compatibilityDate ?? null,
    compatibilityFlags: manifest.compatibilityFlags ?? [],
    modules: modulesOf(row),
  }
}

/** The modules and their content digests, from the build receipt's SBOM (its file components). */
export function modulesOf(row: VersionRow): Array<{name: string; sha256: string}> {
  const sbom = (row.receipt as {sbom?: {components?: Array<{type?: string; name?: string; hashes?: Array<{content?: string}>}>}}).sbom
  return (sbom?.components ?? [])
    .filter((component) => component.type === 'file' && typeof component.name === 'string')
    .map((component) => ({name: component.name!, sha256: component.hashes?.[0]?.content ?? ''}))
}
