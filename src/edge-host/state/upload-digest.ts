// The identity of an upload's content (../state/scripts.ts): a repeated upload with the same digest
// changes nothing and restarts no shard.
import {canonicalDigest, sha256Hex} from '../../canonical-json.js'
import type {ScriptUpload} from './scripts.js'

/** Identity of an upload's content: equal digests mean a repeated upload that changes nothing. */
export function uploadDigest(upload: ScriptUpload): string {
  return canonicalDigest({
    ...upload,
    modules: upload.modules.map((module) => ({name: module.name, type: module.type, sha256: sha256Hex(module.content)})),
  })
}
