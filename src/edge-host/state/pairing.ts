// Pairing with the kit: the one-time pairing code, the shared secret it is exchanged for, and the
// nonces of recently signed requests (a replayed request is refused). `host pairing-code --rotate`
// writes here while the host runs; every change is its own transaction.
import {randomInt, timingSafeEqual} from 'node:crypto'
import {sha256Hex} from '../../canonical-json.js'
import {generateSecret, type NonceLedger} from '../../protocol/signing.js'
import type {HostDatabase, WriteTx} from './database.js'

const NONCE_PRUNE_INTERVAL_MS = 60_000

type MetaKey = 'pairing_code' | 'pairing_secret'

export class Pairing {
  private lastNoncePruneMs = 0

  constructor(private readonly db: HostDatabase) {}

  /** The unused pairing code, or null once it was used. */
  code(): string | null {
    return this.meta('pairing_code')
  }

  /** Issues a new one-time code, replacing any unused one. The current pairing stays valid. */
  issueCode(): string {
    const code = newPairingCode()
    this.db.write((tx) => setMeta(tx, 'pairing_code', code))
    return code
  }

  isPaired(): boolean {
    return this.secret() !== null
  }

  secret(): string | null {
    return this.meta('pairing_secret')
  }

  /** Exchanges the one-time code for a fresh secret, replacing any earlier pairing. */
  complete(code: string): {secret: string; pairedAt: number} | null {
    return this.db.write((tx) => {
      const expected = this.code()
      if (expected === null || !sameText(expected, normalizePairingCode(code))) return null
      const secret = generateSecret()
      setMeta(tx, 'pairing_code', null)
      setMeta(tx, 'pairing_secret', secret)
      return {secret, pairedAt: Date.now()}
    })
  }

  readonly nonces: NonceLedger = {
    remember: (nonce, expiresAtSeconds) =>
      this.db.write((tx) => {
        const now = Date.now()
        if (now - this.lastNoncePruneMs > NONCE_PRUNE_INTERVAL_MS) {
          this.lastNoncePruneMs = now
          tx.run('DELETE FROM nonces WHERE expires_at < ?', Math.floor(now / 1000))
        }
        return tx.run('INSERT OR IGNORE INTO nonces (nonce, expires_at) VALUES (?, ?)', nonce, expiresAtSeconds).changes === 1
      }),
  }

  private meta(key: MetaKey): string | null {
    return this.db.one<{value: string}>('SELECT value FROM meta WHERE key = ?', key)?.value ?? null
  }
}

function setMeta(tx: WriteTx, key: MetaKey, value: string | null): void {
  if (value === null) tx.run('DELETE FROM meta WHERE key = ?', key)
  else tx.upsert('meta', ['key'], {key, value})
}

/** 20 characters of Crockford base32 (100 bits) in groups of four: easy to read out and type. */
function newPairingCode(): string {
  const alphabet = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'
  const characters = Array.from({length: 20}, () => alphabet[randomInt(alphabet.length)])
  return characters.join('').replace(/(.{4})(?=.)/g, '$1-')
}

/** Codes are compared case-insensitively, ignoring spaces. */
function normalizePairingCode(code: string): string {
  return code.trim().toUpperCase().replace(/\s+/g, '')
}

/** Constant time, over fixed-size digests so not even the length of the expected text leaks. */
function sameText(a: string, b: string): boolean {
  return timingSafeEqual(Buffer.from(sha256Hex(a), 'hex'), Buffer.from(sha256Hex(b), 'hex'))
}
