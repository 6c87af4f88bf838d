// The management side of static assets: which files the host lacks, storing sent files, and the
// check that an upload names only files the host holds.
import type {Logger} from 'pino'
import type {ReleaseAssets} from '../../protocol/management-api.js'
import {HostError} from '../errors.js'
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
