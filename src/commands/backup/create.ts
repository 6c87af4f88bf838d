import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {durationFlag} from '../../cli/flags.js'
import {withProgress} from '../../cli/progress.js'
import {createBackup} from '../../engine/backup/create.js'

export default class BackupCreate extends BaseCommand<typeof BackupCreate> {
  static override description = `Back up the store, the artifact store and the edge host's data, consistently, into a new directory.

Runs inside a backup fence: it joins the one already open (under \`edgeworkers fence run -- …\`) or
begins one and always lifts it. Deploys that arrive meanwhile are deferred; the data plane keeps
serving. Writes store/ (SQLite: an online-backup copy; PostgreSQL: every table as NDJSON from one
snapshot transaction), artifacts/, host/snapshot.tar and, last, manifest.json with a SHA-256 for
every file. The directory holds secrets (the pairing secret, Worker secrets): it is created 0700.
A kit of several hosts: every host's snapshot, the first in host/snapshot.tar, the others in
hosts/<12 hex>.tar; a host that does not answer is not waited for — it is named (\`hostsMissing\` in
the manifest and the result, a \`missing\` line here) and the backup holds the others (exit 0).
Exit codes: 0 written; 2 the directory is not new or empty (nothing written), bad --ttl/--reason;
6 unpaired, or another fence is in the way; 7 a deploy stayed in flight (deploy.lease_seconds) after
the fence began — try again; 8 the artifact store lacks an artifact a version needs;
10 the host did not answer or refused the snapshot (the partial backup is removed); 130 SIGINT, 143 SIGTERM:
it lifts the fence it began and removes the partial backup first, and says so.`
  static override examples = [
    '<%= config.bin %> backup create /backups/2026-11-30',
    '<%= config.bin %> fence run -- <%= config.bin %> backup create /backups/$(date +%F)',
    '<%= config.bin %> backup create /backups/today --ttl 900 --json',
  ]
  static override args = {
    dir: Args.string({required: true, description: 'Where to write the backup: a new or empty directory'}),
  }
  static override enableJsonFlag = true
  static override flags = {
    ttl: durationFlag({description: 'TTL of the fence this backup begins: 1800, 30m, 2h (default fence.default_ttl_seconds)'}),
    reason: Flags.string({description: 'Reason recorded on the fence (default: backup to <dir>)'}),
  }

  /** The backup got as far as asking for its fence. */
  private fenceAsked = false

  /** createBackup stops on the signal, lifts its fence, removes its partial directory and says so. */
  protected override unwindsOnInterrupt(): boolean {
    return true
  }

  /** Said when it could not clean up (a second signal). */
  protected override interruptNote(): string {
    if (!this.fenceAsked) return 'no backup fence was begun and nothing was written'
    return `it stopped before cleaning up: a backup fence it began stays up until the host lifts it at its TTL (\`edgeworkers fence end\` lifts it now), and ${this.args.dir} may hold a partial backup to remove`
  }

  async run() {
    const json = this.jsonEnabled()
    const engine = await this.engine({interactive: !json})
    const result = await withProgress('Backup', json, (report) =>
      createBackup(
        engine,
        {dir: this.args.dir, ttlSeconds: this.flags.ttl, reason: this.flags.reason, actor: this.operator, signal: this.interrupted},
        {
          onStage: (stage) => {
            this.fenceAsked ||= stage === 'fence'
            report(stage)
          },
        },
      ),
    )
    return this.respond(result, () =>
      [
        `backup       ${result.dir}`,
        `fence        ${result.fenceId} (${result.scope})`,
        `store        ${result.store.backend}, ${result.store.tables.length} tables, ${result.store.tables.reduce((sum, table) => sum + table.rows, 0)} rows`,
        `artifacts    ${result.artifacts}`,
        ...result.hosts.map((host) => `host         ${host.host} (${host.fingerprint.slice(0, 12)}), ${host.snapshot} ${host.bytes} bytes`),
        ...result.hostsMissing.map((host) => `missing      ${host.host} did not answer; it is not in this backup (${host.error})`),
        `files        ${result.files} (${result.bytes} bytes), digests in ${result.manifest}`,
      ].join('\n'),
    )
  }
}
