import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../cli/base-command.js'
import {withProgress} from '../cli/progress.js'
import {ExitCode} from '../cli/exit-codes.js'
import {canonicalJson} from '../canonical-json.js'
import {quickstartDir, runQuickstart, type QuickstartStep} from '../quickstart/run.js'

const STEP_TITLES: Record<QuickstartStep, string> = {
  store: 'Migrate the embedded SQLite store',
  host: 'Start a local edge host on workerd',
  pair: 'Pair the store with the host',
  tenant: 'Create a company and a department',
  deploy: 'Deploy fixtures/workers/hello',
  fetch: 'Fetch the Worker through the host',
  retire: 'Retire the department and its Worker',
  'orphan-report': 'Report what the host still serves unowned',
}

export default class Quickstart extends BaseCommand<typeof Quickstart> {
  static override description = `Run the main job end to end on embedded defaults, with no other set-up.

Works in <data-dir>/quickstart (default ~/.local/share/edgeworkers/quickstart; it says where before
starting): migrates a SQLite store there, starts and pairs a local edge host on workerd, creates
company "quickstart" and department "hello", deploys fixtures/workers/hello, fetches it through the
host, retires the department's Worker (its URL then answers 404) and prints the orphan report. Every
run starts from an empty sandbox, so a rerun does exactly the same. The host is stopped at the end
unless --keep-running is given (then Ctrl-C stops it).

Exit codes: 0 done, 8 a step did not reach its expected outcome, 2 the directory exists and is not a
quickstart sandbox.`
  static override examples = [
    '<%= config.bin %> quickstart',
    '<%= config.bin %> quickstart --data-dir ./.edgeworkers',
    '<%= config.bin %> quickstart --keep-running',
    '<%= config.bin %> quickstart --json',
  ]
  static override enableJsonFlag = true
  static override flags = {
    'keep-running': Flags.boolean({description: 'Leave the edge host serving until Ctrl-C'}),
  }

  async run() {
    const json = this.jsonEnabled()
    if (!json) this.logToStderr(`quickstart works in ${quickstartDir(this.settings)} (emptied at each run; --data-dir moves it)`)
    const steps = Object.keys(STEP_TITLES) as QuickstartStep[]
    const done = await withProgress('Quickstart', json, (report) =>
      runQuickstart(this.settings, {
        keepRunning: this.flags['keep-running'],
        onStep: (step) => report(`${steps.indexOf(step) + 1}/${steps.length} ${STEP_TITLES[step]}`),
      }),
    )
    const {host, ...report} = done
    const exitCode = done.deploy.state !== 'completed' || done.response.status !== 200 || done.retire.state !== 'retired' ? ExitCode.failed : ExitCode.ok
    const text = () =>
      [
        `data dir    ${done.dataDir}`,
        `store       ${done.store}`,
        `edge host   ${done.adminUrl} (scope ${done.scope}; log ${done.hostLog})`,
        `worker      ${done.deploy.scriptName} (company ${done.companyId}, department ${done.departmentId})`,
        `version     ${done.deploy.versionId} (generation ${done.deploy.releaseGeneration})`,
        `deploy      ${done.deploy.state}${done.deploy.code ? ` (${done.deploy.code})` : ''}`,
        `url         ${done.deploy.url ?? '-'}`,
        `response    ${done.response.status} ${done.response.body.trimEnd()}`,
        `retire      ${done.retire.state}${done.retire.code ? ` (${done.retire.code})` : ''}; now ${done.retiredResponse.status} ${done.retiredResponse.body}`,
        `orphans     ${canonicalJson(done.orphanReport)}`,
        host ? 'the edge host keeps serving; press Ctrl-C to stop it' : 'edge host stopped',
      ].join('\n')
    if (!host) return this.respond(report, text, exitCode)
    // --keep-running: the report is printed now, then the host serves until Ctrl-C.
    if (this.jsonEnabled()) this.logJson(report)
    else this.log(text())
    process.exitCode = exitCode
    this.hostKeptRunning = true
    await this.untilInterrupted()
    await host.stop()
    return undefined
  }

  /** The quickstart serves until a signal once it is done; before that a signal stops it at once. */
  private hostKeptRunning = false

  protected override unwindsOnInterrupt(): boolean {
    return this.hostKeptRunning
  }

  protected override interruptNote(): string {
    return this.hostKeptRunning
      ? 'the edge host stopped; the quickstart sandbox stays until the next quickstart empties it'
      : 'the quickstart stopped part-way; its sandbox stays until the next quickstart empties it'
  }
}
