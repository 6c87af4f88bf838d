// The host's identity: an Ed25519 key pair created in the data dir on first start. Its public key's
// fingerprint names the kit scope the paired store works in (see kitScopeFor).
import {createPrivateKey, createPublicKey, generateKeyPairSync, sign, type KeyObject} from 'node:crypto'
import {existsSync} from 'node:fs'
import {readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {fingerprintOf, kitScopeFor} from '../protocol/signing.js'
import {assertPrivate} from '../util/private-files.js'

export const IDENTITY_KEY_FILE = 'identity.key'

export interface HostIdentity {
  /** base64 of the raw 32-byte public key, as the protocol carries it. */
  publicKey: string
  fingerprint: string
  scope: string
  sign(message: string): string
}

export async function loadOrCreateIdentity(dataDir: string): Promise<HostIdentity> {
  const file = path.join(dataDir, IDENTITY_KEY_FILE)
  if (existsSync(file)) assertPrivate(file, 'file')
  else {
    const {privateKey} = generateKeyPairSync('ed25519')
    // 'wx': two hosts racing on a fresh dir must not end up with different keys.
    await writeFile(file, privateKey.export({type: 'pkcs8', format: 'pem'}), {mode: 0o600, flag: 'wx'}).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw error
    })
  }
  return identityFrom(createPrivateKey(await readFile(file)))
}

function identityFrom(privateKey: KeyObject): HostIdentity {
  const jwk = createPublicKey(privateKey).export({format: 'jwk'})
  const publicKey = Buffer.from(jwk.x!, 'base64url').toString('base64')
  return {
    publicKey,
    fingerprint: fingerprintOf(publicKey),
    scope: kitScopeFor(publicKey),
    sign: (message) => sign(null, Buffer.from(message), privateKey).toString('base64'),
  }
}
