import {OutboxActionCommand} from '../../cli/outbox-action.js'

export default class OutboxCancel extends OutboxActionCommand {
  static override description = `Cancel an outbox row: no lane takes it again.

Refused while a runner holds the row under a live lease, when it is finished, or for a deploy whose
version is deploying (it may already be on the host: retry it so a pass settles it). Written to the
audit log. The row is named by its id or a unique prefix; or every row that --status, --operation
(--lane) and --older-than select. Exit codes: 0 done; 2 an ambiguous prefix; 5 no such row; 6 refused
(with a selection: any row refused, the others done).`
  static override examples = [
    '<%= config.bin %> outbox cancel 3f2b9c1e-5d7a-4e8b-9c0d-1a2b3c4d5e6f',
    '<%= config.bin %> outbox cancel 3f2b9c1e',
    '<%= config.bin %> outbox cancel --status uncertain --lane control_audit',
  ]
  protected readonly action = 'cancel'
}
