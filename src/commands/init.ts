import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../cli/base-command.js'
import {initProject, TEMPLATES} from '../engine/project/init.js'

export default class Init extends BaseCommand<typeof Init> {
  static override description = `Write a small working Worker project (wrangler.toml, TypeScript source, .gitignore) that deploy accepts.

Templates: hello (a greeting), durable-object (a counter kept in a Durable Object), websocket (an
echo server), hono (a Hono app with a middleware and two routes; run npm install first). The
compatibility date is the newest the installed workerd knows. Never overwrites a file.

Exit codes: 0 written, 2 a file exists already, or a bad name or template.`
  static override examples = [
    '<%= config.bin %> init my-worker',
    '<%= config.bin %> init chat --template websocket',
    '<%= config.bin %> init api --template hono --department acme-sales && (cd api && npm install) && <%= config.bin %> deploy api',
  ]
  static override args = {
    dir: Args.string({required: true, description: 'Project directory (created if missing)'}),
  }
  static override enableJsonFlag = true
  static override flags = {
    template: Flags.option({options: TEMPLATES, default: 'hello' as const, description: 'What the project starts as'})(),
    name: Flags.string({description: 'The Worker name in wrangler.toml (default: the directory name)'}),
    department: Flags.string({
      description: "The department deploy targets, written as wrangler.toml's [edgeworkers] department (default: deploy asks for --department)",
    }),
  }

  async run() {
    const result = await initProject(this.args.dir, {template: this.flags.template, name: this.flags.name, department: this.flags.department})
    return this.respond(result, () =>
      [
        `wrote ${result.template} project ${result.name} in ${result.dir}:`,
        ...result.files.map((file) => `  ${file}`),
        'next:',
        ...result.next.map((step) => `  ${step}`),
      ].join('\n'),
    )
  }
}
