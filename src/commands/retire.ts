import {createInterface} from 'node:readline/promises'
import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {KitError} from '../errors.js'
import {BaseCommand} from '../cli/base-command.js'
import {withProgress} from '../cli/progress.js'
import {ExitCode} from '../cli/exit-codes.js'
import type {RetirementStep} from '../engine/retire/host-retirement.js'
import {planRetirement, retireDepartment, type RetireOutcome, type RetireProgress} from '../engine/retire/retire-department.js'

const PROGRESS_TITLES: Record<RetireProgress, string> = {
  delete: 'Soft-delete the department and its service accounts',
  lockdown: 'Lock the Worker down (403 worker_retired)',
  access_policy: 'Close its access policy (teamsync_internal, empty allowlist)',
  secrets_purge: 'Drop its secrets',
  credentials_purge: 'Drop its service-account credentials',
  retire: 'Retire the script on the edge host (404 worker_not_found)',
}

export default class Retire extends BaseCommand<typeof Retire> {
  static override description = `Delete a department and permanently retire its Worker.

Soft-deletes the department and its service accounts, then — by what the Worker's deployed release
supports — locks it down, closes its access policy and drops its secrets and credentials on the edge
host, and only then has the host retire the script: from then on its URL answers 404
worker_not_found. The host keeps the Worker's data. There is no undo. When the host cannot be told,
the department stays deleted and the retirement is pending: the next reconcile pass retries it.
Retiring again reports "already retired".

It asks for confirmation in a terminal (type the department id); --yes skips the question, and is
needed when stdin or stdout is not a terminal (a script, cron).

Exit codes: 0 retired (or already retired, or nothing to retire), 7 retirement pending,
2 bad flags, not confirmed, or no --yes outside a terminal, 5 unknown or already-deleted department, unknown company, or a
department of another company.`
  static override examples = [
    '<%= config.bin %> retire acme-sales',
    '<%= config.bin %> retire acme-sales --company acme --dry-run',
    '<%= config.bin %> retire acme-sales --yes --json',
    '<%= config.bin %> retire acme-sales --dry-run --json',
  ]
  static override args = {
    'department-id': Args.string({required: true, description: 'Department id'}),
  }
  static override enableJsonFlag = true
  static override flags = {
    company: Flags.string({description: 'Company id the department must belong to'}),
    'dry-run': Flags.boolean({description: 'Show what would happen; write nothing, call nothing'}),
    yes: Flags.boolean({char: 'y', description: 'Retire without asking (required outside a terminal)'}),
  }

  async run() {
    const json = this.jsonEnabled()
    const company = this.flags.company
    const dryRun = this.flags['dry-run']
    const engine = await this.engine({interactive: !json})
    const request = {departmentId: this.args['department-id'], companyId: company, dryRun, actor: this.operator}
    // Bad input fails here, as one line, before any progress is drawn or anything written.
    const plan = await planRetirement(engine, request)
    if (dryRun || plan.state === 'already_retired') return this.respond(plan, () => render(plan))
    if (!this.flags.yes) await confirmRetirement(plan.departmentId, plan.scriptName)
    const result = await withProgress(
      'Retire',
      json,
      (report) => retireDepartment(engine, request, (step) => report(PROGRESS_TITLES[step])),
      (outcome) => `Retire: ${outcome.state.replace('_', ' ')}`,
    )
    return this.respond(result, () => render(result), result.state === 'pending' ? ExitCode.pending : ExitCode.ok)
  }
}

/** In a terminal, the operator types the department id (as heroku's `apps:destroy` asks for the app); elsewhere --yes is required. */
async function confirmRetirement(departmentId: string, scriptName: string | null): Promise<void> {
  if (!process.stdin.isTTY || !process.stdout.isTTY) {
    throw new KitError('usage', `retiring ${departmentId} is permanent: pass --yes to confirm (no terminal to ask in)`)
  }
  const what = scriptName ? `department ${departmentId} and its Worker ${scriptName}` : `department ${departmentId}`
  const prompt = createInterface({input: process.stdin, output: process.stderr})
  const answer = await prompt
    .question(`This deletes ${what} for good; its URL will answer 404. Type ${departmentId} to confirm: `)
    .finally(() => prompt.close())
  if (answer.trim() !== departmentId) throw new KitError('usage', `not confirmed: nothing was retired`)
}

function render(result: RetireOutcome): string {
  const worker = result.scriptName ? `${result.scriptName} (Worker ${result.workerId})` : 'none'
  const steps = (list: RetirementStep[]) => (list.length === 0 ? '-' : list.join(' → '))
  const head = [`department   ${result.departmentId} (company ${result.companyId})`, `worker       ${worker}`]
  switch (result.state) {
    case 'planned':
      return [
        'dry run: nothing was written and the host was not called',
        ...head,
        `would delete the department and ${result.serviceAccounts.length} service account(s)${result.serviceAccounts.length ? `: ${result.serviceAccounts.join(', ')}` : ''}`,
        `host steps   ${steps(result.steps)}`,
      ].join('\n')
    case 'already_retired':
      return [...head, 'already retired: nothing to do'].join('\n')
    case 'no_worker':
      return [...head, `deleted the department and ${result.serviceAccounts.length} service account(s); it had no Worker to retire`].join('\n')
    case 'retired':
      return [
        ...head,
        `service accounts deleted: ${result.serviceAccounts.length}`,
        `host steps   ${steps(result.steps)}`,
        'retired: its URL now answers 404 worker_not_found',
      ].join('\n')
    case 'pending':
      return [...head, `retirement pending (${result.code}): ${result.message}`].join('\n')
  }
}
