// What the deploy task uploads for a version: its verified release, the ids that name it, and a
// gradual deployment's split (the release kept beside it).
import type {UploadScriptInput} from '../../provider/types.js'
import type {VersionRow, WorkerRow} from '../../store/index.js'
import {assetConfigOf} from '../project/assets/config.js'
import type {VerifiedVersion} from '../project/integrity.js'
import {queueConsumersOf, scriptModulesOf, workerBindingsOf} from '../project/worker-config.js'

const TAGS = ['edgeworkers-kit']

export function uploadInputOf(
  worker: WorkerRow,
  version: VersionRow,
  beside: VersionRow | undefined,
  verified: VerifiedVersion,
  services: ReadonlyMap<string, string>,
): UploadScriptInput {
  const split = version.split
  return {
    scriptName: worker.script_name,
    mainModule: verified.bundle.mainModule,
    compatibilityDate: verified.bundle.compatibilityDate,
    compatibilityFlags: verified.manifest.compatibilityFlags ?? [],
    releaseGeneration: version.release_generation,
    builderPolicy: version.builder_policy,
    modules: scriptModulesOf(verified.manifest, verified.bundle.modules),
    bindings: workerBindingsOf(verified.manifest, services),
    tags: TAGS,
    department: worker.department_id,
    assets: verified.manifest.assets && verified.bundle.assets ? {config: assetConfigOf(verified.manifest.assets), ...verified.bundle.assets} : null,
    crons: verified.manifest.crons ?? [],
    queueConsumers: queueConsumersOf(verified.manifest),
    versionIds: versionIdsOf(version),
    split: split && {
      releaseGeneration: split.beside.release_generation,
      versionIds: beside ? versionIdsOf(beside) : [split.beside.version_id],
      percentage: split.beside.percentage,
    },
  }
}

/** The ids that name a version's release: its own, and the version a rollback's copy was made of. */
function versionIdsOf(version: Pick<VersionRow, 'id' | 'rollback_of'>): string[] {
  return version.rollback_of ? [version.id, version.rollback_of] : [version.id]
}
