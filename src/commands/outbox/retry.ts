import {OutboxActionCommand} from '../../cli/outbox-action.js'

export default class OutboxRetry extends OutboxActionCommand {
  static override description =
    `Make an outbox row pending and due now, so the next pass dispatches it (an uncertain deploy: the operator's repair once they know what the host holds).

Refused while a runner holds the row under a live lease, or when it is finished. Retrying a deploy is
an enqueue: maintenance and a pending restore refuse it with 409. Written to the audit log.
The row is named by its id or a unique prefix (the status view's 8 characters); or every row that
--status, --operation (--lane) and --older-than select, each under the same rules.
Exit codes: 0 done; 2 an ambiguous prefix; 5 no such row; 6 refused (lease held, finished, a gate is
closed; with a selection: any row refused, the others done).`
  static override examples = [
    '<%= config.bin %> outbox retry 3f2b9c1e-5d7a-4e8b-9c0d-1a2b3c4d5e6f',
    '<%= config.bin %> outbox retry 3f2b9c1e',
    '<%= config.bin %> outbox retry --status failed --operation deploy --older-than 1h',
  ]
  protected readonly action = 'retry'
}
