// Which version serves which static asset object (issue #31): one row per version and asset SHA-256,
// written with the version, so the artifact cleanup lane deletes an `asset/sha256/…` object only when
// no retained version names it (a purged company's versions take their rows with them).
//
// A version committed before this migration names its asset files only inside its bundle, which the
// store cannot read: each such version (its manifest has an `assets` key) gets the row `*`, "every
// asset object", so cleanup keeps all of them while it exists. Frozen: literals only.
import {sql, type Kysely} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('edge_worker_version_assets')
    .addColumn('version_id', 'text', (c) => c.notNull().references('edge_worker_versions.id').onDelete('cascade'))
    .addColumn('asset_digest', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('edge_worker_version_assets_pk', ['version_id', 'asset_digest'])
    .execute()
  // Cleanup and the orphan report ask which of a set of digests any version names.
  await db.schema.createIndex('edge_worker_version_assets_digest').on('edge_worker_version_assets').column('asset_digest').execute()
  await sql`
    insert into edge_worker_version_assets (version_id, asset_digest)
    select id, '*' from edge_worker_versions where manifest like '%"assets":%'`.execute(db)
}
