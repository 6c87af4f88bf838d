// A script's credentials: secrets and service-account passwords, bound into the Worker and never
// answered back (only their SHA-256 digests). A secret and a binding of one script never share a
// name — the secret would shadow the binding — whichever of the two comes second is refused.
import {sha256Hex} from '../../canonical-json.js'
import type {Binding, ControlCopy} from '../../protocol/management-api.js'
import {HostError} from '../errors.js'
import type {HostDatabase} from './database.js'
import type {FencedTx} from './fences.js'

export interface SecretRecord {
  name: string
  sha256: string
  updatedAt: number
}

export interface ServiceAccountRecord {
  id: string
  username: string
  passwordSha256: string
  updatedAt: number
}

export class Credentials {
  constructor(private readonly db: HostDatabase) {}

  secrets(script: string): SecretRecord[] {
    return this.db.all<SecretRecord>('SELECT name, sha256, updated_at AS updatedAt FROM secrets WHERE script = ? ORDER BY name', script)
  }

  /** Names and values, for the Worker's environment. */
  secretValuesByName(script: string): Array<{name: string; value: string}> {
    return this.db.all('SELECT name, value FROM secrets WHERE script = ? ORDER BY name', script)
  }

  /** The values of a script's secrets (and service-account passwords): kept out of its tail events. */
  secretValues(script: string): string[] {
    const rows = this.db.all<{value: string}>(
      'SELECT value FROM secrets WHERE script = @script UNION ALL SELECT password FROM service_accounts WHERE script = @script',
      {
        script,
      },
    )
    return rows.map((row) => row.value)
  }

  putSecret(tx: FencedTx, script: string, name: string, value: string): {sha256: string} {
    const bindings = this.db.one<{bindings: string}>('SELECT bindings FROM scripts WHERE name = ?', script)
    const bound: Binding[] = bindings ? JSON.parse(bindings.bindings) : []
    if (bound.some((binding) => binding.name === name)) throw new HostError('binding_name_taken', `script ${script} already has a binding named ${name}`)
    const sha256 = sha256Hex(value)
    tx.upsert('secrets', ['script', 'name'], {script, name, value, sha256, updated_at: tx.now})
    return {sha256}
  }

  deleteSecret(tx: FencedTx, script: string, name: string): boolean {
    return tx.run('DELETE FROM secrets WHERE script = ? AND name = ?', script, name).changes === 1
  }

  /** Returns the names it removed. */
  purgeSecrets(tx: FencedTx, script: string): string[] {
    const names = this.secrets(script).map((secret) => secret.name)
    tx.run('DELETE FROM secrets WHERE script = ?', script)
    return names
  }

  /** Sets the script's secrets and service accounts to exactly these (a copy from another host of its kit). */
  replaceAll(tx: FencedTx, script: string, copy: Pick<ControlCopy, 'secrets' | 'serviceAccounts'>): void {
    tx.run('DELETE FROM secrets WHERE script = ?', script)
    tx.run('DELETE FROM service_accounts WHERE script = ?', script)
    for (const secret of copy.secrets) this.putSecret(tx, script, secret.name, secret.value)
    for (const account of copy.serviceAccounts) this.putServiceAccount(tx, script, account.id, account)
  }

  /** An upload's bindings may not take a name a secret already holds. */
  assertNoSecretShadowed(script: string, bindings: Binding[]): void {
    const secretNames = new Set(this.secrets(script).map((secret) => secret.name))
    const clash = bindings.find((binding) => secretNames.has(binding.name))
    if (clash) throw new HostError('binding_name_taken', `script ${script} has a secret named ${clash.name}; bindings cannot reuse it`)
  }

  serviceAccounts(script: string): ServiceAccountRecord[] {
    return this.db.all<ServiceAccountRecord>(
      'SELECT id, username, password_sha256 AS passwordSha256, updated_at AS updatedAt FROM service_accounts WHERE script = ? ORDER BY id',
      script,
    )
  }

  /** With their passwords, for the Worker's environment. */
  serviceAccountLogins(script: string): Array<{id: string; username: string; password: string}> {
    return this.db.all('SELECT id, username, password FROM service_accounts WHERE script = ? ORDER BY id', script)
  }

  putServiceAccount(tx: FencedTx, script: string, id: string, login: {username: string; password: string}): {passwordSha256: string} {
    const passwordSha256 = sha256Hex(login.password)
    tx.upsert('service_accounts', ['script', 'id'], {
      script,
      id,
      username: login.username,
      password: login.password,
      password_sha256: passwordSha256,
      updated_at: tx.now,
    })
    return {passwordSha256}
  }

  deleteServiceAccount(tx: FencedTx, script: string, id: string): boolean {
    return tx.run('DELETE FROM service_accounts WHERE script = ? AND id = ?', script, id).changes === 1
  }

  /** Returns the ids it removed. */
  purgeServiceAccounts(tx: FencedTx, script: string): string[] {
    const ids = this.serviceAccounts(script).map((account) => account.id)
    tx.run('DELETE FROM service_accounts WHERE script = ?', script)
    return ids
  }
}
