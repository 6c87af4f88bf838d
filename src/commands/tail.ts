import * as Args from '@oclif/core/args'
import * as Errors from '@oclif/core/errors'
import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../cli/base-command.js'
import {renderTailLine} from '../cli/tail-render.js'
import {tailWorker} from '../engine/tail.js'

export default class Tail extends BaseCommand<typeof Tail> {
  static override description = `Stream one Worker's events live from the edge host.

One event per request the Worker handled: time, method, path, status, outcome (ok, exception, exceededCpu, exceededMemory, canceled), duration, its console.* lines with their level, and its uncaught exceptions with their stack. The stream follows the Worker across redeploys and reconnects when the host restarts. Several tails may run at once.

--format json prints one JSON object per line (the shape is in the README, "Watching Workers"). On a busy Worker the host sends at most host.tail_max_events_per_second events per second and says how many it left out: a "sampling:" line, or under --format json an object with "type": "sampled". Ctrl-C ends it. Exit codes: 130 ended by Ctrl-C (SIGINT), 143 by SIGTERM, 2 bad flag, 5 unknown Worker or never deployed, 6 retired Worker or no paired host, 10 host unreachable at the start or refused the stream.`
  static override examples = [
    '<%= config.bin %> tail acme-sales',
    '<%= config.bin %> tail acme-sales --status error',
    '<%= config.bin %> tail acme-sales --method POST --method PUT --search checkout',
    '<%= config.bin %> tail acme-sales --format json --sampling-rate 0.1 | jq .path',
  ]
  static override args = {
    worker: Args.string({required: true, description: 'Department id, Worker id or script name (dw-…)'}),
  }
  static override flags = {
    format: Flags.option({
      options: ['pretty', 'json'] as const,
      default: 'pretty' as const,
      description: 'pretty: coloured lines in a terminal; json: one event per line',
    })(),
    status: Flags.option({
      options: ['ok', 'error'] as const,
      description: 'Only events that succeeded, or only errors (exceptions, exceeded limits, cancels, 5xx)',
    })(),
    method: Flags.string({multiple: true, description: 'Only requests with this HTTP method (repeatable)'}),
    search: Flags.string({description: 'Only events whose path, console lines or exceptions contain this text (case-insensitive)'}),
    'sampling-rate': Flags.custom<number>({
      helpValue: '<rate>',
      description: 'Keep this share of the events, 0 < rate ≤ 1 (default 1: all)',
      async parse(input) {
        const rate = Number(input)
        if (input.trim() === '' || !Number.isFinite(rate) || rate <= 0 || rate > 1)
          throw new Errors.CLIError(`--sampling-rate ${input}: must be a number above 0 and at most 1`, {exit: 2})
        return rate
      },
    })({default: 1}),
  }

  async run(): Promise<void> {
    const methods = (this.flags.method ?? []).map((method) => method.toUpperCase())
    const badMethod = methods.find((method) => !/^[A-Z]+$/.test(method))
    if (badMethod) throw new Errors.CLIError(`--method ${badMethod}: not an HTTP method`, {exit: 2})
    const json = this.flags.format === 'json'
    const color = !json && process.stdout.isTTY === true && !('NO_COLOR' in process.env)
    const events = tailWorker(await this.engine(), this.args.worker, {
      filters: {status: this.flags.status, methods, search: this.flags.search, samplingRate: this.flags['sampling-rate']},
      signal: this.interrupted,
      // Notices go to stderr: stdout carries only events.
      onNotice: (notice) => {
        if (notice.kind === 'tailing') this.logToStderr(`tailing ${notice.script} (Ctrl-C to stop)`)
        else this.logToStderr(`stream cut, reconnecting: ${notice.reason}`)
      },
    })
    for await (const line of events) this.log(json ? JSON.stringify(line) : renderTailLine(line, color))
  }

  protected override unwindsOnInterrupt(): boolean {
    return true
  }

  protected override interruptNote(): string {
    return 'the stream was closed; nothing was left'
  }
}
