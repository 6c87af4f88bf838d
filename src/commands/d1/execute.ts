import * as Args from '@oclif/core/args'
import * as Errors from '@oclif/core/errors'
import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {table} from '../../cli/table.js'
import {executeD1} from '../../engine/d1.js'

export default class D1Execute extends BaseCommand<typeof D1Execute> {
  static override description = `Run SQL on one of a Worker's D1 databases, as the Worker's env.<binding> sees it.

The statements run on the edge host in one transaction: all of them or none. With several statements, the rows shown are the last one's. --json prints {department, binding, results: [{columns, rows, meta}]}, meta as D1 returns it to a Worker.

Exit codes: 0 ran; 2 bad input (no SQL, both --command and --file, a binding that is not an identifier); 5 unknown department, never deployed, or no such D1 binding; 6 retired Worker or no paired host; 8 the SQL failed (nothing applied; the message is D1's); 10 host unreachable.`
  static override examples = [
    `<%= config.bin %> d1 execute acme-sales DB --command "SELECT * FROM orders LIMIT 10"`,
    '<%= config.bin %> d1 execute acme-sales DB --file seed.sql --json',
  ]
  static override args = {
    department: Args.string({required: true, description: 'Department id, Worker id or script name (dw-…)'}),
    binding: Args.string({required: true, description: "The D1 binding name in the Worker's config (e.g. DB)"}),
  }
  static override flags = {
    command: Flags.string({description: 'The SQL to run', exactlyOne: ['command', 'file']}),
    file: Flags.string({description: 'A file of SQL to run', exactlyOne: ['command', 'file']}),
  }
  static override enableJsonFlag = true

  async run() {
    const {command, file} = this.flags
    const source = command !== undefined ? {command} : file !== undefined ? {file} : undefined
    if (!source) throw new Errors.CLIError('give the SQL with --command or --file', {exit: 2})
    const execution = await executeD1(await this.engine(), this.args.department, this.args.binding, source)
    return this.respond(execution, () => {
      const last = execution.results.at(-1)!
      const rows =
        last.columns.length === 0
          ? `${last.meta.changes} row(s) changed`
          : table(
              last.columns,
              last.rows.map((row) => row.map(cellText)),
              'no rows',
            )
      return `${rows}\n(${last.meta.rows_read} read, ${last.meta.rows_written} written, ${last.meta.duration.toFixed(1)} ms)`
    })
  }
}

function cellText(cell: unknown): string {
  if (cell === null) return 'NULL'
  if (Array.isArray(cell)) return `x'${cell.map((byte: number) => byte.toString(16).padStart(2, '0')).join('')}'`
  return String(cell)
}
