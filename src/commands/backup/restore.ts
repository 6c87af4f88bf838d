import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {ExitCode} from '../../cli/exit-codes.js'
import {withProgress} from '../../cli/progress.js'
import {restoreBackup} from '../../engine/backup/restore.js'

export default class BackupRestore extends BaseCommand<typeof BackupRestore> {
  static override description = `Restore a backup taken by \`backup create\` into the configured store and data dir.

First every file is checked against manifest.json; any mismatch refuses the restore with nothing
changed. Then the artifacts are added to the artifact store, the host snapshot is extracted into
--host-data-dir (new or empty; start \`host serve --data-dir\` on it afterwards; a backup of a kit of
several hosts holds each host's snapshot: --host names which, by default the first), and the store is
replaced whole — every scope in it — with the restore gate of the backup's scope closed: deploys
answer 409 edge_workers_restore_pending until the host has been verified against the store (the host
lacks a deployed release → redeployed; it serves a script the store does not own → retired). That
verification runs at once when the host is up, else in the next \`edgeworkers reconcile\`.
Stop every other edgeworkers process using the store first (cron/timer passes, the TUI).
Exit codes: 0 restored and verified; 2 not a backup, a digest mismatch, a store of the other backend
or schema, --host-data-dir not empty, --host not in the backup (nothing changed); 4 the store is unavailable or at another
schema; 6 the SQLite store is open in another process; 7 restored, verification pending (the host
was restored into a new data dir, or still differs); 10 restored, the host did not answer.`
  static override examples = [
    '<%= config.bin %> backup restore /backups/2026-11-30',
    '<%= config.bin %> backup restore /backups/2026-11-30 --host-data-dir /var/lib/edgeworkers-host --json',
  ]
  static override args = {
    dir: Args.string({required: true, description: 'A backup directory (holds manifest.json)'}),
  }
  static override enableJsonFlag = true
  static override flags = {
    'host-data-dir': Flags.string({description: "Extract the edge host's data snapshot here (a new or empty directory)"}),
    host: Flags.string({
      dependsOn: ['host-data-dir'],
      description: "A backup of a kit of several hosts: whose snapshot to extract (the host's scope or 12 hex; default the first)",
    }),
  }

  async run() {
    const json = this.jsonEnabled()
    // Not this.engine(): the store is about to be replaced, so this process must not hold it open.
    const log = await this.logger({interactive: !json})
    const result = await withProgress('Restore', json, (report) =>
      restoreBackup(
        this.settings,
        {dir: this.args.dir, hostDataDir: this.flags['host-data-dir'], host: this.flags.host},
        {log, hosts: this.hosts, onStage: report},
      ),
    )
    const {verification} = result
    const exitCode =
      verification.state !== 'pending'
        ? ExitCode.ok
        : verification.code === 'edge_host_unreachable' || verification.code === 'edge_host_error'
          ? ExitCode.hostUnreachable
          : ExitCode.pending
    return this.respond(
      result,
      () =>
        [
          `restored     ${result.dir} (taken ${result.backupCreatedAt})`,
          `store        ${result.store.backend} ${result.store.location}: ${result.store.tables} tables, ${result.store.rows} rows`,
          `artifacts    ${result.artifacts}`,
          `host data    ${result.hostDataDir ?? 'not restored (--host-data-dir not given)'}`,
          `verification ${verification.state}${verification.code ? ` (${verification.code})` : ''}`,
          ...(verification.redeployed.length > 0
            ? [`redeployed   ${verification.redeployed.map((entry) => `${entry.scriptName} ${entry.outcome}`).join(', ')}`]
            : []),
          ...(verification.retired.length > 0 ? [`retired      ${verification.retired.join(', ')}`] : []),
          ...(verification.message ? [`detail       ${verification.message}`] : []),
        ].join('\n'),
      exitCode,
    )
  }
}
