// The management side of static assets: which files the host lacks, storing sent files, the
// check that an upload names only files the host holds, and the removal of files no release of a
// script still served names (after an upload replaced a release, or a retirement).
import type {Logger} from 'pino'
import type {ReleaseAssets} from '../../protocol/management-api.js'
import {HostError} from '../errors.js'
import type {HostState} from '../state/host-state.js'
import type {AssetFiles} from './files.js'

export async function assertAssetsHeld(files: AssetFiles, assets: ReleaseAssets): Promise<void> {
  const missing = new Set(await files.missing(assets.files.map((file) => file.sha256)))
  if (missing.size === 0) return
  const first = assets.files.find((file) => missing.has(file.sha256))!
  throw new HostError(
    'assets_missing',
    `${missing.size} asset file${missing.size === 1 ? ' is' : 's are'} not on the host (${first.path} among them); send them first`,
  )
}

export async function putAssets(
  files: AssetFiles,
  sent: ReadonlyArray<{sha256: string; contentBase64: string}>,
  maxBytes: number,
  log: Logger,
): Promise<number> {
  let bytes = 0
  for (const file of sent) {
    const content = Buffer.from(file.contentBase64, 'base64')
    await files.put(file.sha256, content, maxBytes)
    bytes += content.length
  }
  log.info({files: sent.length, bytes}, 'asset files received')
  return sent.length
}

/** Removes the asset files no release of a script still served names; one collection at a time. */
export class AssetCollector {
  private running: Promise<void> = Promise.resolve()

  constructor(
    private readonly files: AssetFiles,
    private readonly state: HostState,
    private readonly log: Logger,
    /** host.asset_unreferenced_grace_seconds, in ms. */
    private readonly graceMs: number,
  ) {}

  /** Queues a collection; it logs what it removed. Resolves when that collection ended. */
  collect(): Promise<void> {
    this.running = this.running
      .then(async () => {
        const removed = await this.files.removeUnreferenced(this.state.releaseAssets.referencedHashes(), this.graceMs)
        if (removed > 0) this.log.info({removed}, 'unreferenced asset files removed')
      })
      .catch((error: unknown) => this.log.warn({err: error}, 'removing unreferenced asset files failed'))
    return this.running
  }
}
