import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {fenceFields, republishLine} from '../../cli/fence-render.js'
import {endFence} from '../../engine/fence/lifecycle.js'

export default class FenceEnd extends BaseCommand<typeof FenceEnd> {
  static override description = `Lift a backup fence (default: the open one), then republish the deploys it deferred.

The host lifts it first, then the store records it and the execution gate opens; deferred deploys
run right away, oldest first (--no-republish leaves them to the next reconcile pass).
Exit codes: 0 lifted; 5 no such fence / none open; 6 already lifted; 10 the host could not be
reached (the fence stays; the host lifts it by itself at its TTL).`
  static override examples = ['<%= config.bin %> fence end', '<%= config.bin %> fence end 0b6c…-…', '<%= config.bin %> fence end --no-republish --json']
  static override args = {
    'fence-id': Args.string({description: 'The fence to lift (default: the scope’s open fence)'}),
  }
  static override enableJsonFlag = true
  static override flags = {
    republish: Flags.boolean({default: true, allowNo: true, description: 'Republish deferred deploys right after the lift'}),
  }

  async run() {
    const engine = await this.engine({interactive: !this.jsonEnabled()})
    const result = await endFence(engine, {fenceId: this.args['fence-id'], republish: this.flags.republish, actor: this.operator})
    return this.respond(result, () => [fenceFields(result.fence), ...(result.republish ? [republishLine(result.republish)] : [])].join('\n'))
  }
}
