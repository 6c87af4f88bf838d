// What every control command shares (`secret put`, `access-policy set`, `api-key rotate`, …): the
// department argument, --json, running the engine's control mutation, rendering its outcome and the
// documented exit code. Secret input comes from stdin or a file, never from argv, and is never echoed.
import {readFile} from 'node:fs/promises'
import * as Args from '@oclif/core/args'
import type {Command} from '@oclif/core/command'
import {applyControl, type ControlOutcome, type ControlRequest} from '../engine/control/apply.js'
import {KitError} from '../errors.js'
import {BaseCommand} from './base-command.js'
import {ExitCode} from './exit-codes.js'

export const departmentArg = Args.string({required: true, description: 'Department id whose Worker this changes'})

export const CONTROL_EXIT_CODES = `Exit codes: 0 applied and recorded; 7 the host's answer was lost — the control_audit lane of
\`reconcile\` settles it from the host's receipt; 8 refused by the host (nothing applied); 2 bad input;
5 unknown department, Worker or service account; 6 refused (no deployed release, release too old for
this control, a backup fence is open, no paired host); 10 host unreachable.`

export abstract class ControlCommand<T extends typeof Command> extends BaseCommand<T> {
  /** Runs the mutation on the department's Worker (see ../engine/control/apply.ts). */
  protected async runControl(request: ControlRequest): Promise<{outcome: ControlOutcome; apiKey?: string}> {
    const engine = await this.engine({interactive: !this.jsonEnabled()})
    const departmentId = (this.args as {department: string}).department
    return applyControl(engine, {departmentId, request, actor: this.operator})
  }

  /** The mutation is not sent again: the receipt says whether the host applied it. */
  protected override interruptNote(): string {
    return 'a change it had queued stays in the outbox until the next `edgeworkers reconcile` settles it from the host receipt (applied if the host got it; if not, run the command again)'
  }

  /** The outcome as the result (`json`: what --json prints; digests only, never a secret), `extra` lines in text, and its exit code. */
  protected finish<R = ControlOutcome>(outcome: ControlOutcome, extra: string[] = [], json: R = outcome as R): R {
    const exitCode = outcome.state === 'pending' ? ExitCode.pending : outcome.state === 'failed' ? ExitCode.failed : ExitCode.ok
    return this.respond(
      json,
      () =>
        [
          `worker       ${outcome.scriptName} (department ${outcome.departmentId})`,
          `operation    ${outcome.operation}${outcome.noop ? ' (nothing to change)' : ''}`,
          `state        ${outcome.state}${outcome.code ? ` (${outcome.code})` : ''}`,
          ...(outcome.message ? [`detail       ${outcome.message}`] : []),
          ...extra,
          `outbox row   ${outcome.outboxId}`,
        ].join('\n'),
      exitCode,
    )
  }

  /** A secret read from `file`, or else from stdin (piped, never a terminal). One trailing newline is dropped. */
  protected async readSecretInput(file: string | undefined, what: string, fileFlag: string): Promise<string> {
    let text: string
    if (file !== undefined) {
      text = await readFile(file, 'utf8').catch((error: NodeJS.ErrnoException) => {
        throw new KitError('usage', `cannot read ${what} from ${file}: ${error.code ?? error.message}`)
      })
    } else {
      if (process.stdin.isTTY) throw new KitError('usage', `pipe the ${what} on stdin or pass ${fileFlag} (it is never taken from the command line)`)
      const chunks: Buffer[] = []
      for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
      text = Buffer.concat(chunks).toString('utf8')
    }
    const value = text.endsWith('\r\n') ? text.slice(0, -2) : text.endsWith('\n') ? text.slice(0, -1) : text
    if (value === '') throw new KitError('usage', `the ${what} is empty`)
    return value
  }
}

/** Parses a JSON argument; anything but valid JSON is a usage error. */
export function parseJsonArgument(text: string, what: string): unknown {
  try {
    return JSON.parse(text)
  } catch (error) {
    throw new KitError('usage', `${what} is not valid JSON: ${(error as Error).message}`)
  }
}
