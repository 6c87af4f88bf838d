// Many edge hosts per kit (issue #36, docs/many-hosts.md): `kit_hosts` lists the hosts of each kit
// scope, each with its own pairing secret, state and health as the kit last saw it;
// `kit_host_releases` records which release each host was last confirmed to serve. Every pairing
// that is active now becomes its kit's first member, so a single-host kit keeps working unchanged.
import {sql, type Kysely} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('kit_hosts')
    // A host belongs to one kit at a time: its own scope is the key.
    .addColumn('host_scope', 'text', (c) => c.primaryKey())
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('host_url', 'text', (c) => c.notNull())
    .addColumn('host_fingerprint', 'text', (c) => c.notNull())
    .addColumn('host_public_key', 'text', (c) => c.notNull())
    .addColumn('shared_secret', 'text', (c) => c.notNull())
    .addColumn('public_url', 'text')
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('added_at', 'bigint', (c) => c.notNull())
    .addColumn('removed_at', 'bigint')
    .addColumn('unreachable_since', 'bigint')
    .addColumn('behind_since', 'bigint')
    .addColumn('confirmed_at', 'bigint')
    .addColumn('checked_at', 'bigint')
    .addCheckConstraint('kit_hosts_state_check', sql`state in ('active', 'draining')`)
    .execute()
  await db.schema.createIndex('kit_hosts_scope').on('kit_hosts').columns(['scope', 'added_at']).execute()

  await db.schema
    .createTable('kit_host_releases')
    .addColumn('host_scope', 'text', (c) => c.notNull())
    .addColumn('script_name', 'text', (c) => c.notNull())
    .addColumn('release_generation', 'text', (c) => c.notNull())
    .addColumn('ready_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('kit_host_releases_pk', ['host_scope', 'script_name'])
    .execute()

  await sql`
    insert into kit_hosts (host_scope, scope, host_url, host_fingerprint, host_public_key, shared_secret, state, added_at)
    select scope, scope, host_url, host_fingerprint, host_public_key, shared_secret, 'active', paired_at
    from kit_pairings where unpaired_at is null`.execute(db)
}
