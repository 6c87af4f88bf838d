// A kit wired to a real edge host for engine tests: the store of a StoreHarness, paired through the
// real pairing exchange (pairWithHost), an engine over it, and one fresh department per test so
// tests never share a Worker (the host keeps scripts across the store's per-test wipes).
import {settingsSchema, type Settings} from '../../src/config/schema.js'
import {createEngine, type Engine} from '../../src/engine/context.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {pairWithHost} from '../../src/provider/onprem/pairing.js'
import type {PairingResult} from '../../src/provider/types.js'
import type {StoreHarness} from './stores.js'
import type {TestHost} from './host.js'

export type SettingsOverrides = {[section in keyof Settings]?: Settings[section] extends object ? Partial<Settings[section]> : Settings[section]}

export class KitHarness {
  private pairing?: PairingResult
  private departments = 0
  readonly companyId = 'acme'

  constructor(
    private readonly t: StoreHarness,
    private readonly host: () => TestHost,
  ) {}

  /** Pairs once (the code is one-time); later calls re-record the same pairing after a store wipe. */
  async pair(hostUrl?: string): Promise<PairingResult> {
    this.pairing ??= await pairWithHost(this.host().adminUrl, this.host().pairingCode!, 10_000)
    const pairing = {...this.pairing, host_url: hostUrl ?? this.host().adminUrl}
    await this.t.store.kit.savePairing(pairing)
    return pairing
  }

  settings(overrides: SettingsOverrides = {}): Settings {
    const base = this.t.settings()
    const merged: Record<string, unknown> = {...base}
    for (const [section, values] of Object.entries(overrides)) {
      merged[section] = typeof values === 'object' && values !== null ? {...(base as unknown as Record<string, object>)[section], ...values} : values
    }
    return settingsSchema.parse(merged)
  }

  async engine(overrides: SettingsOverrides = {}): Promise<Engine> {
    return createEngine(this.t.store, this.settings(overrides), onPremHosts)
  }

  /** A new department of the test company (created with the company on first use). */
  async department(): Promise<string> {
    if (!(await this.t.store.tenants.getCompany(this.companyId))) await this.t.store.tenants.createCompany({id: this.companyId, name: 'Acme'})
    const id = `dept-${this.t.backend}-${process.pid}-${Date.now().toString(36)}-${++this.departments}`
    await this.t.store.tenants.createDepartment({id, company_id: this.companyId, name: id})
    return id
  }
}
