import * as Args from '@oclif/core/args'
import {BaseCommand} from '../../cli/base-command.js'
import {table} from '../../cli/table.js'
import {listTriggers} from '../../engine/triggers.js'

export default class TriggersList extends BaseCommand<typeof TriggersList> {
  static override description = `List Workers' cron triggers as the edge host runs them: the last run, how it ended, the next run (UTC).

Without a department, every deployed Worker's triggers. LAST RUN is the occurrence the last finished run was for; OUTCOME is workerd's (ok, exception, exceededCpu, …) or why the host could not run it. --json prints {triggers: [{department, script, cron, lastRunAt, lastOutcome, nextRunAt}]}, times in ms since the epoch.

Exit codes: 0 listed; 5 unknown department or never deployed; 6 retired Worker or no paired host; 10 host unreachable.`
  static override examples = ['<%= config.bin %> triggers list', '<%= config.bin %> triggers list acme-sales --json']
  static override args = {
    department: Args.string({description: 'Department id, Worker id or script name (dw-…); all Workers when left out'}),
  }
  static override enableJsonFlag = true

  async run() {
    const listing = await listTriggers(await this.engine(), this.args.department)
    const utc = (ms: number | null) => (ms === null ? '-' : new Date(ms).toISOString())
    return this.respond(listing, () =>
      table(
        ['DEPARTMENT', 'CRON', 'LAST RUN', 'OUTCOME', 'NEXT RUN'],
        listing.triggers.map((trigger) => [trigger.department, trigger.cron, utc(trigger.lastRunAt), trigger.lastOutcome ?? '-', utc(trigger.nextRunAt)]),
        'no cron triggers',
      ),
    )
  }
}
