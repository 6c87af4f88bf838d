import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {ExitCode, exitCodeFor} from '../../cli/exit-codes.js'
import {KitError} from '../../errors.js'
import {checkStoreSchema, migrateStore} from '../../engine/store-schema.js'

export default class DbMigrate extends BaseCommand<typeof DbMigrate> {
  static override description = `Migrate the store to this build's schema, or check that it matches.

--check changes nothing and exits 4 naming the difference (pending migrations, or migrations applied
by a newer edgeworkers) when the schema does not match. Every other command refuses to run on a
schema that does not match.`
  static override examples = [
    '<%= config.bin %> db migrate',
    '<%= config.bin %> db migrate --check',
    'EDGEWORKERS_STORE__URL=postgres://kit@db.internal/edgeworkers <%= config.bin %> db migrate --check --json',
  ]
  static override enableJsonFlag = true
  static override flags = {
    check: Flags.boolean({description: 'Only check that the schema matches this build; change nothing'}),
  }

  async run() {
    if (this.flags.check) {
      const report = await checkStoreSchema(this.settings)
      // --json reports the status either way; the exit code says whether it matched.
      if (report.matches || this.jsonEnabled()) {
        const text = () => `store ${report.location} matches this build (${report.applied.length} migrations applied)`
        return this.respond(report, text, report.matches ? ExitCode.ok : exitCodeFor.schema_mismatch)
      }
      const remedy = report.unknown.length > 0 ? 'upgrade edgeworkers' : 'run `edgeworkers db migrate`'
      throw new KitError('schema_mismatch', `store schema does not match this build (${report.difference}); ${remedy}`)
    }
    const {location, applied} = await migrateStore(this.settings)
    return this.respond({location, applied}, () =>
      applied.length > 0
        ? `applied ${applied.length} migration${applied.length === 1 ? '' : 's'} to ${location}: ${applied.join(', ')}`
        : `store ${location} is already at this build's schema; nothing applied`,
    )
  }
}
