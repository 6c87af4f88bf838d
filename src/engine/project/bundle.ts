// The bundle: the code of a version. It is the canonical JSON of
// {mainModule, compatibilityDate, modules: [{name, contentBase64}], durableObjects}, UTF-8, with
// the modules in module-tuple order (main first) under the names they are imported by, so the same
// project always gives the same bytes. The rest of what workerd is told (module types, flags, vars,
// static data, services) comes from the verified manifest (./worker-config.ts): the manifest digest
// covers it, and projects that use none of it keep the bundle bytes they always had.
// A version with static assets adds `assets`: {files: [{path, sha256, size}], headers, redirects} —
// so the bundle digest covers the asset manifest, and through each file's SHA-256 its bytes.
import {z} from 'zod'
import {canonicalJson} from '../../canonical-json.js'
import {KitError} from '../../errors.js'
import {assetFileSchema, MAX_ASSET_RULES_BYTES} from '../../protocol/management-api.js'
import type {BundleAssets} from './assets/collect.js'
import {mainModuleNameOf, moduleEntriesOf, type ProjectFile, type WorkerManifest} from './manifest.js'

const durableObjectSchema = z.strictObject({binding: z.string().min(1), className: z.string().min(1)})

const bundleSchema = z.strictObject({
  mainModule: z.string().min(1),
  compatibilityDate: z.string().min(1),
  modules: z.array(z.strictObject({name: z.string().min(1), contentBase64: z.string()})).min(1),
  durableObjects: z.array(durableObjectSchema),
  assets: z
    .strictObject({
      files: z.array(assetFileSchema),
      headers: z.string().max(MAX_ASSET_RULES_BYTES).nullable(),
      redirects: z.string().max(MAX_ASSET_RULES_BYTES).nullable(),
    })
    .optional(),
})

export interface BundleModule {
  name: string
  content: Buffer
}

export interface WorkerBundle {
  mainModule: string
  compatibilityDate: string
  /** In module-tuple order: the main module first. */
  modules: BundleModule[]
  durableObjects: z.infer<typeof durableObjectSchema>[]
  assets: BundleAssets | null
}

/** The bundle bytes for a manifest and its module files (any order; the tuple order is applied). */
export function encodeBundle(manifest: WorkerManifest, moduleFiles: readonly ProjectFile[], assets: BundleAssets | null = null): Buffer {
  const byPath = new Map(moduleFiles.map((file) => [file.path, file.bytes]))
  const modules = moduleEntriesOf(manifest).map(({path, name}) => {
    const content = byPath.get(path)
    if (!content) throw new Error(`module ${path} was not read`)
    return {name, contentBase64: content.toString('base64')}
  })
  return Buffer.from(
    canonicalJson({
      mainModule: mainModuleNameOf(manifest),
      compatibilityDate: manifest.compatibilityDate,
      modules,
      durableObjects: manifest.durableObjects ?? [],
      ...(assets === null ? {} : {assets: {files: assets.files, headers: assets.headers, redirects: assets.redirects}}),
    }),
    'utf8',
  )
}

/**
 * Decodes bundle bytes into the modules to upload. Throws KitError('failed', …,
 * 'artifact_integrity_failed') when the bytes are not a well-formed bundle.
 */
export function parseBundle(bytes: Uint8Array): WorkerBundle {
  let data: unknown
  try {
    data = JSON.parse(Buffer.from(bytes).toString('utf8'))
  } catch {
    throw malformed('it is not JSON')
  }
  const result = bundleSchema.safeParse(data)
  if (!result.success) {
    const issue = result.error.issues[0]!
    throw malformed(`${issue.path.join('.') || 'the document'}: ${issue.message}`)
  }
  const {mainModule, compatibilityDate, modules, durableObjects, assets} = result.data
  const seen = new Set<string>()
  const decoded = modules.map(({name, contentBase64}) => {
    if (seen.has(name)) throw malformed(`module ${JSON.stringify(name)} appears twice`)
    seen.add(name)
    const content = Buffer.from(contentBase64, 'base64')
    // Node's decoder skips junk silently; only canonical base64 round-trips.
    if (content.toString('base64') !== contentBase64) throw malformed(`module ${JSON.stringify(name)} is not valid base64`)
    return {name, content}
  })
  if (decoded[0]!.name !== mainModule) throw malformed(`the first module is not the main module ${JSON.stringify(mainModule)}`)
  const paths = assets?.files.map((file) => file.path) ?? []
  if (paths.some((file, index) => index > 0 && file <= paths[index - 1]!)) throw malformed('asset paths are not sorted and distinct')
  return {mainModule, compatibilityDate, modules: decoded, durableObjects, assets: assets ?? null}
}

function malformed(why: string): KitError {
  return new KitError('failed', `bundle is malformed: ${why}`, 'artifact_integrity_failed')
}
