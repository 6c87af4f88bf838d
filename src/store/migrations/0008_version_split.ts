// Gradual deployments (issue #34): a version deployed beside another, each serving a share of the
// requests. `split` (JSON, null = the version alone at 100 %) is set when the version row is created
// and never changes: a change of percentages is a new version row (a copy), so the newest intent
// wins by the deploy order as any deploy does (docs/gradual-deployments.md).
import type {Kysely} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('edge_worker_versions').addColumn('split', 'text').execute()
}
