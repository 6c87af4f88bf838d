// `versions diff <worker> A B`: what changed from version A to version B — modules (by content
// digest), bindings, vars, compatibility date and flags, static assets and the rest of the manifest.
// Everything but the asset files comes from the version rows (manifest and build receipt); asset
// files are listed in the bundle, read from the artifact store when it still holds it.
import {canonicalJson} from '../../canonical-json.js'
import {ArtifactError} from '../../artifacts/store.js'
import type {JsonValue, VersionRow} from '../../store/index.js'
import type {Engine} from '../context.js'
import {parseBundle} from '../project/bundle.js'
import type {WorkerManifest} from '../project/manifest.js'
import {findWorker} from '../workers.js'
import {namedVersion} from './names.js'
import {modulesOf, summaryOf, type VersionSummary} from './queries.js'

export interface Change {
  name: string
  change: 'added' | 'removed' | 'changed'
  /** The value in A; null when added. */
  from: JsonValue
  /** The value in B; null when removed. */
  to: JsonValue
}

export const DIFF_SECTIONS = ['modules', 'bindings', 'vars', 'compatibility', 'assets', 'other'] as const
export type DiffSection = (typeof DIFF_SECTIONS)[number]

export interface VersionDiff {
  from: VersionSummary
  to: VersionSummary
  /** Same release generation: the same code, config and assets. */
  identical: boolean
  changes: Record<DiffSection, Change[]>
  /** Versions whose bundle the artifact store no longer holds: their asset files were not compared. */
  assetFilesUnknown: string[]
}

type Entries = Map<string, JsonValue>

export async function diffWorkerVersions(engine: Engine, handle: string, fromName: string, toName: string): Promise<VersionDiff> {
  const worker = await findWorker(engine, handle)
  const versions = await engine.store.workers.listVersions(worker.id)
  const [a, b] = [namedVersion(versions, fromName), namedVersion(versions, toName)]
  const [assetsA, assetsB] = await Promise.all([assetFilesOf(engine, a), assetFilesOf(engine, b)])
  const [manifestA, manifestB] = [a.manifest as unknown as WorkerManifest, b.manifest as unknown as WorkerManifest]
  const filesKnown = assetsA !== null && assetsB !== null
  return {
    from: summaryOf(worker, a),
    to: summaryOf(worker, b),
    identical: a.release_generation === b.release_generation,
    changes: {
      modules: changesBetween(moduleEntries(a), moduleEntries(b)),
      bindings: changesBetween(bindingEntries(manifestA), bindingEntries(manifestB)),
      vars: changesBetween(new Map(Object.entries(manifestA.vars ?? {})), new Map(Object.entries(manifestB.vars ?? {}))),
      compatibility: changesBetween(compatibilityEntries(manifestA), compatibilityEntries(manifestB)),
      assets: changesBetween(assetEntries(manifestA, filesKnown ? assetsA : null), assetEntries(manifestB, filesKnown ? assetsB : null)),
      other: changesBetween(otherEntries(manifestA), otherEntries(manifestB)),
    },
    assetFilesUnknown: [assetsA === null ? a.id : null, assetsB === null ? b.id : null].filter((id): id is string => id !== null),
  }
}

/** Entries present on one side only are added or removed; on both with other values, changed. Sorted by name. */
function changesBetween(a: Entries, b: Entries): Change[] {
  const names = [...new Set([...a.keys(), ...b.keys()])].sort()
  return names.flatMap((name): Change[] => {
    const [from, to] = [a.get(name), b.get(name)]
    if (from === undefined) return [{name, change: 'added', from: null, to: to!}]
    if (to === undefined) return [{name, change: 'removed', from, to: null}]
    return canonicalJson(from) === canonicalJson(to) ? [] : [{name, change: 'changed', from, to}]
  })
}

function moduleEntries(version: VersionRow): Entries {
  return new Map(modulesOf(version).map(({name, sha256}) => [name, `sha256:${sha256}`]))
}

/** Each binding under `<list>.<binding name>` (queue consumers under their queue), valued by the rest of its declaration. */
function bindingEntries(manifest: WorkerManifest): Entries {
  const lists: Array<[string, Array<Record<string, unknown>> | undefined, string]> = [
    ['durableObjects', manifest.durableObjects, 'binding'],
    ['kvNamespaces', manifest.kvNamespaces, 'binding'],
    ['d1Databases', manifest.d1Databases, 'binding'],
    ['r2Buckets', manifest.r2Buckets, 'binding'],
    ['queues.producers', manifest.queues?.producers, 'binding'],
    ['queues.consumers', manifest.queues?.consumers, 'queue'],
    ['services', manifest.services, 'binding'],
  ]
  const entries: Entries = new Map()
  for (const [list, declared, key] of lists) {
    for (const entry of declared ?? []) {
      const {[key]: name, ...rest} = entry
      entries.set(`${list}.${String(name)}`, rest as JsonValue)
    }
  }
  return entries
}

function compatibilityEntries(manifest: WorkerManifest): Entries {
  return new Map<string, JsonValue>([
    ['compatibilityDate', manifest.compatibilityDate],
    ...(manifest.compatibilityFlags ?? []).map((flag): [string, JsonValue] => [`compatibilityFlags.${flag}`, true]),
  ])
}

function assetEntries(manifest: WorkerManifest, files: Entries | null): Entries {
  if (!manifest.assets) return new Map()
  return new Map<string, JsonValue>([['config', manifest.assets as JsonValue], ...(files ?? [])])
}

function otherEntries(manifest: WorkerManifest): Entries {
  return new Map<string, JsonValue>([
    ['main', manifest.main],
    ['builderPolicy', manifest.builderPolicy],
    ['crons', (manifest.crons ?? []) as JsonValue],
    ...Object.entries(manifest.staticData ?? {}).map(([key, value]): [string, JsonValue] => [`staticData.${key}`, value as JsonValue]),
    ...Object.entries(manifest.dependencies ?? {}).map(([name, version]): [string, JsonValue] => [`dependencies.${name}`, version]),
  ])
}

/** Each asset file by its path (/…) → its SHA-256 (plus `_headers`, `_redirects`), from the bundle; null when the artifact store no longer holds it. */
async function assetFilesOf(engine: Engine, version: VersionRow): Promise<Entries | null> {
  if (!(version.manifest as unknown as WorkerManifest).assets) return new Map()
  let bytes: Buffer
  try {
    bytes = await engine.artifacts.get(version.bundle_artifact_key, engine.settings.deploy.bundle_max_bytes)
  } catch (error) {
    if (error instanceof ArtifactError) return null
    throw error
  }
  const assets = parseBundle(bytes).assets
  if (!assets) return new Map()
  return new Map<string, JsonValue>([
    ...assets.files.map((file): [string, JsonValue] => [file.path, `sha256:${file.sha256}`]),
    ...(assets.headers === null ? [] : [['_headers', assets.headers] as [string, JsonValue]]),
    ...(assets.redirects === null ? [] : [['_redirects', assets.redirects] as [string, JsonValue]]),
  ])
}
