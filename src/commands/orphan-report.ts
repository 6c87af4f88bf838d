import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../cli/base-command.js'
import {table} from '../cli/table.js'
import {canonicalJson} from '../canonical-json.js'
import {orphanReport} from '../engine/retire/orphan-report.js'

export default class OrphanReport extends BaseCommand<typeof OrphanReport> {
  static override description = `Count what the edge host still serves that the store no longer owns. Read-only.

Lists the paired host's scripts (at most host_reconcile.listing_max_pages pages) and prints one JSON
object with sorted keys: asset_objects_unreferenced, host_asset_files_unreferenced, listed, namespace,
orphans_pending, orphans_unsettled, stored_name_differs, unowned, unowned_serving_code, worker_rows.
A kit of several hosts lists each host: \`hosts\` holds, under each host's scope, its own error (null
when it answered), host_asset_files_unreferenced, listed, unowned and unowned_serving_code; the
kit-wide counts are over every host that answered. A host that does not answer is named there; the
report fails only when no host answers.
After a company purge, orphans_pending falls to 0 as reconcile passes retire the orphans, and
unowned_serving_code should be 0. asset_objects_unreferenced lists the static asset objects of the
artifact store no version serves (the artifact_cleanup lane deletes them once past
artifact_cleanup.grace_seconds); host_asset_files_unreferenced the SHA-256s of the host's asset files
no release names (the host removes them after host.asset_unreferenced_grace_seconds).

Exit codes: 0 reported, 6 not paired with a host, 10 the listing failed ("edge host script listing
answered <status>") or did not end within the page cap.`
  static override examples = ['<%= config.bin %> orphan-report', '<%= config.bin %> orphan-report --json', '<%= config.bin %> orphan-report --table']
  static override enableJsonFlag = true
  static override flags = {
    table: Flags.boolean({exclusive: ['json'], description: 'Print a two-column table for people instead of JSON'}),
  }

  async run() {
    const report = await orphanReport(await this.engine())
    return this.respond(report, () =>
      this.flags.table
        ? table(
            ['KEY', 'VALUE'],
            Object.entries(report).flatMap(([key, value]) =>
              key === 'hosts'
                ? Object.entries(report.hosts ?? {}).map(([host, counts]) => [`hosts ${host}`, canonicalJson(counts)])
                : [[key, Array.isArray(value) ? value.join(' ') || '-' : String(value)]],
            ),
            '',
          )
        : canonicalJson(report),
    )
  }
}
