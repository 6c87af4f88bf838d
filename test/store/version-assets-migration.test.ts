// Migration 0008: versions committed before edge_worker_version_assets name their asset files only
// inside their bundles, so each one with assets is recorded as serving every asset object (`*`).
import {Migrator} from 'kysely'
import {expect, test} from 'vitest'
import {migrations} from '../../src/store/migrations/index.js'
import {openPostgres} from '../../src/store/postgres/open.js'
import {openSqlite} from '../../src/store/sqlite/open.js'
import {describeEachStore, TestClock} from '../support/stores.js'

const BEFORE_0008 = Object.fromEntries(Object.entries(migrations).filter(([name]) => name < '0008'))

describeEachStore('migration 0008: the asset objects each version serves', (t) => {
  test('a version with assets from before it keeps every asset object; one without keeps none', async () => {
    const url = await t.freshUrl()
    const settings = t.settings({store: {url}})
    const db = t.backend === 'sqlite' ? openSqlite(url, settings) : await openPostgres(url, settings)
    try {
      const {error} = await new Migrator({db, provider: {getMigrations: async () => BEFORE_0008}}).migrateToLatest()
      if (error) throw error
    } finally {
      await db.destroy()
    }
    const T = TestClock.START
    const version = (id: string, manifest: string) =>
      `insert into edge_worker_versions (id, worker_id, release_generation, builder_policy, state, project_artifact_key, project_digest,
        bundle_artifact_key, bundle_digest, manifest, receipt, created_at, updated_at) values ('${id}', 'w1', 'rg-${id}', 'p', 'deployed', 'k', 'd', 'k', 'd',
        '${manifest}', '{}', ${T}, ${T});`
    await t.exec(
      [
        `insert into companies (id, name, created_at, updated_at) values ('co', 'Co', ${T}, ${T});`,
        `insert into departments (id, company_id, name, created_at, updated_at) values ('dept', 'co', 'Dept', ${T}, ${T});`,
        `insert into edge_workers (id, company_id, department_id, script_name, status, created_at, updated_at) values ('w1', 'co', 'dept', 'dw-1', 'active', ${T}, ${T});`,
        version('with-assets', '{"assets":{"directory":"public"},"main":"index.js"}'),
        version('code-only', '{"main":"index.js"}'),
      ].join('\n'),
      url,
    )

    const store = await t.open(settings)
    expect(await store.migrate()).toEqual(['0008_version_assets'])
    const digest = 'a'.repeat(64)
    expect(await store.sweeps.assetReferences([digest])).toEqual(new Map([[digest, ['with-assets']]]))
  })
})
