// Ctrl-C (SIGINT) and SIGTERM, the same for every command: one line on stderr, `interrupted by
// SIGINT: <what was left and what happens next>`, then exit 128 + the signal's number (130, 143: what
// a shell reports for a process the signal ended). A command whose work stops on `signal` and cleans
// up as it unwinds (a fence lifted, a partial directory removed, a stream closed) is let finish that
// first; any other exits at once with its note. A second signal exits at once.
import {ExitCode} from './exit-codes.js'
import {Interrupted} from '../errors.js'

export const SIGNAL_EXIT_CODES = {SIGINT: ExitCode.interruptedBySigint, SIGTERM: ExitCode.interruptedBySigterm} as const
export type HandledSignal = keyof typeof SIGNAL_EXIT_CODES
const HANDLED_SIGNALS = Object.keys(SIGNAL_EXIT_CODES) as HandledSignal[]

export interface InterruptionOptions {
  /** True while the command's work stops on `signal` and cleans up by itself. */
  unwinds(): boolean
  /** What an interruption leaves now, said when the work did not say it (see Interrupted.left). */
  note(): string | Promise<string>
  write(line: string): void
}

export class Interruption {
  private readonly controller = new AbortController()
  private received: HandledSignal | null = null
  private reported = false

  constructor(private readonly options: InterruptionOptions) {}

  /** Aborted, with an Interrupted reason, at the first signal. */
  get signal(): AbortSignal {
    return this.controller.signal
  }

  get by(): HandledSignal | null {
    return this.received
  }

  install(): void {
    for (const signal of HANDLED_SIGNALS) process.on(signal, this.onSignal)
  }

  uninstall(): void {
    for (const signal of HANDLED_SIGNALS) process.off(signal, this.onSignal)
  }

  /** Writes the line (once) and returns the exit code. `left`: what the work said it left. */
  async report(left?: string): Promise<number> {
    const signal = this.received!
    if (!this.reported) {
      this.reported = true
      const note = left ?? (await Promise.resolve(this.options.note()).catch((error: unknown) => `what it left is unknown (${(error as Error).message})`))
      this.options.write(`interrupted by ${signal}: ${note}`)
    }
    return SIGNAL_EXIT_CODES[signal]
  }

  private readonly onSignal = (signal: HandledSignal): void => {
    const again = this.received !== null
    this.received ??= signal
    if (!again && this.options.unwinds()) {
      this.controller.abort(new Interrupted())
      return
    }
    void this.report().then((code) => process.exit(code))
  }
}
