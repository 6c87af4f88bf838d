import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {createDepartment} from '../../engine/tenants.js'

export default class DepartmentCreate extends BaseCommand<typeof DepartmentCreate> {
  static override description = 'Create a department of a company, with its service accounts (all or nothing).'
  static override examples = [
    '<%= config.bin %> department create acme Sales',
    '<%= config.bin %> department create acme Sales --id acme-sales --service-account ci --service-account backup --json',
  ]
  static override args = {
    'company-id': Args.string({required: true, description: 'Company id'}),
    name: Args.string({required: true, description: 'Display name (1–200 characters)'}),
  }
  static override enableJsonFlag = true
  static override flags = {
    id: Flags.string({description: "Department id (1–64 letters, digits, '.', '_' or '-'); default: a random UUID"}),
    'service-account': Flags.string({multiple: true, description: 'Create a service account with this name (repeatable)'}),
  }

  async run() {
    const created = await createDepartment(await this.engine(), {
      id: this.flags.id,
      companyId: this.args['company-id'],
      name: this.args.name,
      serviceAccounts: this.flags['service-account'] ?? [],
    })
    const {department, service_accounts: accounts} = created
    return this.respond(created, () =>
      [
        `created department ${department.id} (${department.name}) in company ${department.company_id}`,
        ...accounts.map((account) => `created service account ${account.name} (${account.id})`),
      ].join('\n'),
    )
  }
}
