import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {purgeCompany} from '../../engine/tenants.js'
import {KitError} from '../../errors.js'

export default class CompanyPurge extends BaseCommand<typeof CompanyPurge> {
  static override description = `Hard-delete a company: its departments, service accounts, Workers and versions go with it.

Outbox and audit rows stay — they are the evidence of what was deployed; the host reconcile lane
later retires the company's scripts on the edge host and deletes their data there (Durable Objects,
KV, D1, R2, queues). Permanent: needs --yes.`
  static override examples = ['<%= config.bin %> company purge acme --yes', '<%= config.bin %> company purge acme --yes --json']
  static override args = {
    'company-id': Args.string({required: true, description: 'Company id'}),
  }
  static override enableJsonFlag = true
  static override flags = {
    yes: Flags.boolean({description: 'Confirm the permanent delete'}),
  }

  async run() {
    const companyId = this.args['company-id']
    if (!this.flags.yes) {
      throw new KitError('usage', `company purge permanently deletes ${companyId} with its departments, Workers and versions; add --yes to confirm`)
    }
    const purged = await purgeCompany(await this.engine(), companyId)
    const {deleted} = purged
    const counted = (n: number, noun: string) => `${n} ${noun}${n === 1 ? '' : 's'}`
    return this.respond(purged, () =>
      [
        `purged company ${companyId}: ${counted(deleted.departments, 'department')}, ${counted(deleted.service_accounts, 'service account')},`,
        `${counted(deleted.workers, 'Worker')} and ${counted(deleted.versions, 'version')} deleted; outbox and audit rows kept`,
      ].join(' '),
    )
  }
}
