// What a workerd process prints — its own log lines and its Workers' console output, which workerd
// does not attribute to a script — reaches the host's log (stdout, journald) only through the tail's
// redaction (../../util/redact.ts), with the secret values of every script the process was given:
// those are the only ones it can print. A load into the running process adds its script's values
// before the script runs there.
import {secretRedactor} from '../../util/redact.js'
import type {RunnableScript} from '../../workerd/script.js'

export class ProcessOutputRedaction {
  private readonly values = new Set<string>()
  private redactor = secretRedactor([])

  constructor(scripts: readonly RunnableScript[]) {
    this.add(scripts)
  }

  add(scripts: readonly RunnableScript[]): void {
    const before = this.values.size
    for (const script of scripts) {
      for (const secret of script.secrets) this.values.add(secret.value)
      for (const account of script.serviceAccounts) this.values.add(account.password)
    }
    if (this.values.size !== before) this.redactor = secretRedactor([...this.values])
  }

  readonly redact = (line: string): string => this.redactor(line)
}
