// `deploy --dry-run`: build the project exactly as a deploy would and describe what would be
// deployed — modules with their types and sizes, bindings, flags, digests — writing nothing.
import type {Settings} from '../../config/schema.js'
import {parseBundle} from '../project/bundle.js'
import {buildProject} from '../project/build.js'
import {d1DatabaseIdOf, moduleEntriesOf} from '../project/manifest.js'
import type {ProjectSourceOptions} from '../project/source.js'
import {queueConsumersOf} from '../project/worker-config.js'
import type {QueueConsumer} from '../../protocol/management-api.js'
import type {VersionDigests} from '../project/version-digests.js'

export interface DeployPlan {
  source: {file: string; kind: 'edgeworker' | 'wrangler'; env: string | null; bundled: boolean}
  warnings: string[]
  name: string
  builderPolicy: string
  compatibilityDate: string
  compatibilityFlags: string[]
  mainModule: string
  modules: Array<{name: string; type: string; bytes: number}>
  bindings: {
    vars: string[]
    staticData: boolean
    durableObjects: Array<{binding: string; className: string}>
    kvNamespaces: Array<{binding: string; id: string}>
    d1Databases: Array<{binding: string; id: string}>
    r2Buckets: Array<{binding: string; bucketName: string}>
    /** Queue producers (binding → queue) and the queues the Worker consumes, defaults filled in. */
    queues: {producers: Array<{binding: string; queue: string}>; consumers: QueueConsumer[]}
    /** Cron triggers (UTC) the host runs scheduled() on. */
    crons: string[]
    services: Array<{binding: string; department: string}>
  }
  /** npm packages in the bundle (from package-lock.json), as the SBOM records them. */
  dependencies: Record<string, string>
  digests: VersionDigests
  releaseGeneration: string
  projectArchiveBytes: number
  bundleBytes: number
  /** The static assets: how many files and their bytes (null: the Worker has none). */
  assets: {files: number; bytes: number; binding: string | null} | null
}

export async function planDeploy(settings: Settings, request: {projectDir: string; source?: ProjectSourceOptions}): Promise<DeployPlan> {
  const built = await buildProject(request.projectDir, settings.deploy, request.source)
  const {manifest} = built
  const typeByName = new Map(moduleEntriesOf(manifest).map((entry) => [entry.name, entry.type]))
  const bundle = parseBundle(built.bundle)
  return {
    source: {file: built.source.file, kind: built.source.kind, env: built.source.env, bundled: built.source.bundled},
    warnings: built.source.warnings,
    name: manifest.name,
    builderPolicy: manifest.builderPolicy,
    compatibilityDate: manifest.compatibilityDate,
    compatibilityFlags: manifest.compatibilityFlags ?? [],
    mainModule: bundle.mainModule,
    modules: bundle.modules.map((module) => ({name: module.name, type: typeByName.get(module.name)!, bytes: module.content.byteLength})),
    bindings: {
      vars: Object.keys(manifest.vars ?? {}).sort(),
      staticData: manifest.staticData !== undefined,
      durableObjects: manifest.durableObjects ?? [],
      kvNamespaces: manifest.kvNamespaces ?? [],
      d1Databases: (manifest.d1Databases ?? []).map((database) => ({binding: database.binding, id: d1DatabaseIdOf(database)})),
      r2Buckets: manifest.r2Buckets ?? [],
      queues: {
        producers: (manifest.queues?.producers ?? []).map((producer) => ({binding: producer.binding, queue: producer.queue})),
        consumers: queueConsumersOf(manifest),
      },
      crons: manifest.crons ?? [],
      services: manifest.services ?? [],
    },
    dependencies: manifest.dependencies ?? {},
    digests: built.digests,
    releaseGeneration: built.releaseGeneration,
    projectArchiveBytes: built.projectArchive.byteLength,
    bundleBytes: built.bundle.byteLength,
    assets:
      manifest.assets && built.assets ? {files: built.assets.files.length, bytes: built.assets.totalBytes, binding: manifest.assets.binding ?? null} : null,
  }
}
