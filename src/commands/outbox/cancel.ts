import {OutboxActionCommand} from '../../cli/outbox-action.js'

export default class OutboxCancel extends OutboxActionCommand {
  static override description = `Cancel an outbox row: no lane takes it again.

Refused while a runner holds the row under a live lease, when it is finished, or for a deploy whose
version is deploying (it may already be on the host: retry it so a pass settles it). Written to the
audit log. Exit codes: 0 done; 5 no such row; 6 refused.`
  static override examples = ['<%= config.bin %> outbox cancel 3f2b9c1e-5d7a-4e8b-9c0d-1a2b3c4d5e6f']
  protected readonly action = 'cancel'
}
