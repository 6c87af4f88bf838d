import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../../cli/base-command.js'
import {durationFlag} from '../../cli/flags.js'
import {fenceFields} from '../../cli/fence-render.js'
import {beginFence} from '../../engine/fence/lifecycle.js'

export default class FenceBegin extends BaseCommand<typeof FenceBegin> {
  static override description = `Begin a backup fence: host mutations freeze so store, artifacts and host data can be backed up together.

The fence is recorded in the store first (deploy execution stops; new deploys are accepted and
deferred), then the host holds it with a TTL and lifts it by itself when the TTL runs out, so a
crashed backup never leaves the host frozen. The data plane keeps serving. Lift it with
\`fence end\`, or use \`fence run -- <command>\` to have it lifted for you.
Exit codes: 0 fenced; 2 bad --ttl/--reason; 6 a fence is already open or the store is unpaired;
10 the host did not take it (nothing is left in place unless the message says so).`
  static override examples = [
    '<%= config.bin %> fence begin --reason "nightly backup"',
    '<%= config.bin %> fence begin --ttl 900 --reason "volume snapshot" --json',
  ]
  static override enableJsonFlag = true
  static override flags = {
    ttl: durationFlag({
      description: 'How long until the host lifts the fence by itself: 900, 15m, 1h (default fence.default_ttl_seconds; at most fence.max_ttl_seconds)',
    }),
    reason: Flags.string({default: 'backup', description: 'Why the host is fenced (shown in status and audit)'}),
  }

  async run() {
    const engine = await this.engine()
    const fence = await beginFence(engine, {ttlSeconds: this.flags.ttl, reason: this.flags.reason, actor: this.operator})
    return this.respond(fence, () => `${fenceFields(fence)}\nlift it with: edgeworkers fence end ${fence.id}`)
  }
}
