import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../../cli/base-command.js'
import {applyD1Migrations, DEFAULT_MIGRATIONS_DIR, DEFAULT_MIGRATIONS_TABLE} from '../../../engine/d1.js'

export default class D1MigrationsApply extends BaseCommand<typeof D1MigrationsApply> {
  static override description = `Apply a D1 database's pending migrations, as wrangler d1 migrations apply does.

Migrations are the .sql files of --dir, applied in name order (0001_init.sql, 0002_…); each one runs on the edge host in one transaction with its record in the migrations table (wrangler's d1_migrations, same columns), so it is applied once, and a failed one leaves nothing of itself behind. Those applied before it stay. Without --dir, the directory is the binding's migrations_dir in the Worker's deployed config (wrangler's d1_databases entry, or migrationsDir in edgeworker.json), relative to --project, else "migrations"; without --table, its migrations_table, else d1_migrations.

Exit codes: 0 applied (or nothing pending); 2 bad input (no such directory, a binding or table that is not an identifier); 5 unknown department, never deployed, or no such D1 binding; 6 retired Worker or no paired host; 8 a migration failed (the message names it); 10 host unreachable.`
  static override examples = [
    '<%= config.bin %> d1 migrations apply acme-sales DB',
    '<%= config.bin %> d1 migrations apply acme-sales DB --dir db/migrations --json',
  ]
  static override args = {
    department: Args.string({required: true, description: 'Department id, Worker id or script name (dw-…)'}),
    binding: Args.string({required: true, description: "The D1 binding name in the Worker's config (e.g. DB)"}),
  }
  static override flags = {
    dir: Flags.string({description: `The directory of migration files [default: the binding's migrations_dir, else ${DEFAULT_MIGRATIONS_DIR}]`}),
    table: Flags.string({description: `The table recording applied migrations [default: the binding's migrations_table, else ${DEFAULT_MIGRATIONS_TABLE}]`}),
    project: Flags.string({description: 'The project directory a configured migrations_dir is relative to', default: '.'}),
  }
  static override enableJsonFlag = true

  async run() {
    const outcome = await applyD1Migrations(await this.engine(), this.args.department, this.args.binding, {
      dir: this.flags.dir,
      table: this.flags.table,
      projectDir: this.flags.project,
    })
    return this.respond(outcome, () =>
      outcome.applied.length === 0
        ? `no pending migrations (${outcome.alreadyApplied.length} applied before)`
        : outcome.applied.map((name) => `applied ${name}`).join('\n'),
    )
  }
}
