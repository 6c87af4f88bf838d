import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {createCompany} from '../../engine/tenants.js'

export default class CompanyCreate extends BaseCommand<typeof CompanyCreate> {
  static override description = 'Create a company (a tenant that owns departments).'
  static override examples = ['<%= config.bin %> company create "Acme Corp"', '<%= config.bin %> company create "Acme Corp" --id acme --json']
  static override args = {
    name: Args.string({required: true, description: 'Display name (1–200 characters)'}),
  }
  static override enableJsonFlag = true
  static override flags = {
    id: Flags.string({description: "Company id (1–64 letters, digits, '.', '_' or '-'); default: a random UUID"}),
  }

  async run() {
    const company = await createCompany(await this.engine(), {id: this.flags.id, name: this.args.name})
    return this.respond(company, () => `created company ${company.id} (${company.name})`)
  }
}
