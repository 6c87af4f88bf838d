// Shared plumbing for every command: config layering, opening the store (refusing a mismatched
// schema), JSON vs text output, and turning errors into one line plus a documented exit code.
import os from 'node:os'
import {Command} from '@oclif/core/command'
import * as Errors from '@oclif/core/errors'
import * as Flags from '@oclif/core/flags'
import type * as Interfaces from '@oclif/core/interfaces'
import {loadConfig, type LoadedConfig} from '../config/load.js'
import type {Settings} from '../config/schema.js'
import {Interrupted, KitError} from '../errors.js'
import {ExitCode} from './exit-codes.js'
import {failureOf} from './failure.js'
import {Interruption} from './interrupt.js'
import {openStore, type AuditActor, type Store} from '../store/index.js'
import {createEngine, silentLogger, type Engine, type EngineLogger} from '../engine/context.js'
import {onPremHosts} from '../provider/onprem/hosts.js'
import type {HostConnector} from '../provider/types.js'
import {createLogger, resolveLogFormat} from './logger.js'

export type BaseFlags<T extends typeof Command> = Interfaces.InferredFlags<(typeof BaseCommand)['baseFlags'] & T['flags']>
export type BaseArgs<T extends typeof Command> = Interfaces.InferredArgs<T['args']>

export abstract class BaseCommand<T extends typeof Command> extends Command {
  static override baseFlags = {
    'data-dir': Flags.string({
      helpGroup: 'GLOBAL',
      description: 'Data directory (store, artifacts, local state). Env: EDGEWORKERS_DATA_DIR.',
    }),
    config: Flags.string({
      helpGroup: 'GLOBAL',
      description: 'Config file (TOML, or JSON when it ends in .json). Env: EDGEWORKERS_CONFIG. Default: <data-dir>/edgeworkers.toml.',
    }),
    'log-format': Flags.option({
      options: ['auto', 'human', 'json'] as const,
      helpGroup: 'GLOBAL',
      description: 'Log lines on stderr: human in a terminal, JSON otherwise (auto). Setting log_format.',
    })(),
    quiet: Flags.boolean({helpGroup: 'GLOBAL', exclusive: ['verbose'], description: 'Log errors only'}),
    verbose: Flags.boolean({helpGroup: 'GLOBAL', exclusive: ['quiet'], description: 'Log everything down to debug'}),
  }

  protected flags!: BaseFlags<T>
  protected args!: BaseArgs<T>
  /** Every positional argument, including those after `--` (what a non-strict command runs). */
  protected positionals: string[] = []
  private loaded?: LoadedConfig
  private openedStore?: Store
  private readonly interruption = new Interruption({
    unwinds: () => this.unwindsOnInterrupt(),
    note: () => this.interruptNote(),
    write: (line) => this.logToStderr(line),
  })

  override async init(): Promise<void> {
    this.interruption.install()
    await super.init()
    const {flags, args, argv} = await this.parse({
      flags: this.ctor.flags,
      baseFlags: (this.ctor as typeof BaseCommand).baseFlags,
      args: this.ctor.args,
      strict: this.ctor.strict,
      enableJsonFlag: this.ctor.enableJsonFlag,
    })
    this.flags = flags as BaseFlags<T>
    this.args = args as BaseArgs<T>
    this.positionals = argv.map(String)
  }

  /**
   * Aborted at the first SIGINT or SIGTERM (./interrupt.ts). Work that stops on it, cleaning up as it
   * unwinds, is let finish when the command's unwindsOnInterrupt() says so.
   */
  protected get interrupted(): AbortSignal {
    return this.interruption.signal
  }

  /** Settles at the first SIGINT or SIGTERM (at once if one came already): what a command that serves until stopped waits on. */
  protected untilInterrupted(): Promise<void> {
    const signal = this.interrupted
    return new Promise((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), {once: true})))
  }

  /** True while the command's work stops on `interrupted` and cleans up by itself; otherwise a signal exits at once. */
  protected unwindsOnInterrupt(): boolean {
    return false
  }

  /** What an interruption leaves now and what happens next: the rest of the one line it prints. */
  protected interruptNote(): string | Promise<string> {
    return 'it stopped where it was; nothing of it keeps running, and what it had already committed stays'
  }

  /** Dotted setting path → flag value, for commands whose flags override settings. */
  protected settingOverrides(): Record<string, unknown> {
    return {}
  }

  protected loadSettings(): LoadedConfig {
    this.loaded ??= loadConfig({
      flags: {data_dir: this.flags['data-dir'], log_format: this.flags['log-format'], ...this.settingOverrides()},
      configPath: this.flags.config,
    })
    return this.loaded
  }

  protected get settings(): Settings {
    return this.loadSettings().settings
  }

  /**
   * Opens the configured store, refusing to continue unless its schema matches this build. Private:
   * commands reach the store through the engine's query and action modules.
   */
  private async store(): Promise<Store> {
    if (this.openedStore) return this.openedStore
    // Only `db migrate` (through the engine) creates a SQLite store; every command refuses a missing one.
    const store = await openStore(this.settings, {create: false})
    const status = await store.schemaStatus()
    if (!status.matches) {
      await store.close()
      throw new KitError('schema_mismatch', `store schema does not match this build (${status.difference}); run \`edgeworkers db migrate\``)
    }
    this.openedStore = store
    return store
  }

  /** The edge hosts this kit pairs with and reaches: on-prem hosts running `host serve`. */
  protected readonly hosts: HostConnector = onPremHosts

  /**
   * The engine over the configured store. Commands that print their own progress pass `interactive`:
   * their info lines would only repeat it; `silent` logs nothing (a full-screen view).
   */
  protected async engine(options: {interactive?: boolean; silent?: boolean} = {}): Promise<Engine> {
    return createEngine(await this.store(), this.settings, this.hosts, options.silent ? silentLogger : await this.logger(options))
  }

  /**
   * The engine's logger. --quiet and --verbose win, then a log_level the operator set. Otherwise a
   * person at a terminal (human format) sees warnings only — and errors only from a command that
   * reports its own outcome (`interactive`), whose retries and failures its output already says.
   */
  protected logger(options: {interactive?: boolean} = {}): Promise<EngineLogger> {
    const {settings, sources} = this.loadSettings()
    const format = resolveLogFormat(settings.log_format)
    let level = settings.log_level
    if (this.flags.quiet) level = 'error'
    else if (this.flags.verbose) level = 'debug'
    else if (sources.log_level === 'default') {
      if (format === 'human') level = options.interactive ? 'error' : 'warn'
      else if (options.interactive) level = 'warn'
    }
    return createLogger({level, format, fd: 2})
  }

  /** The operator running this command, as audit rows name them: their login name. */
  protected get operator(): AuditActor {
    return {type: 'operator', id: os.userInfo().username}
  }

  /**
   * What `run()` returns: the command's typed result. Under --json (oclif's `enableJsonFlag`) oclif
   * prints the returned value, and nothing else reaches stdout; otherwise `text` renders it. A
   * non-zero `exitCode` is the process's exit code once the command is done.
   */
  protected respond<R>(result: R, text: () => string, exitCode: number = ExitCode.ok): R {
    if (!this.jsonEnabled()) this.log(text())
    if (exitCode !== ExitCode.ok) process.exitCode = exitCode
    return result
  }

  /** One JSON object per line on stdout, for commands that stream results (`reconcile --watch --json`). */
  protected printJsonLine(value: unknown): void {
    process.stdout.write(`${JSON.stringify(value)}\n`)
  }

  /** stderr carries warnings and the one-line error under --json too: stdout stays pure JSON. */
  override logToStderr(message = ''): void {
    process.stderr.write(`${message}\n`)
  }

  protected override async finally(error: Error | undefined): Promise<unknown> {
    // Work that ended because of a signal (a tail, a watch, the host): the line, and 130/143.
    if (this.interruption.by !== null && error === undefined) process.exitCode = await this.interruption.report()
    this.interruption.uninstall()
    await this.openedStore?.close().catch(() => {})
    return super.finally(error)
  }

  protected override async catch(error: Error & {exitCode?: number; oclif?: {exit?: number}}): Promise<unknown> {
    if (this.interruption.by !== null && !(error instanceof Errors.ExitError)) {
      const thrown: unknown = error
      return this.exit(await this.interruption.report(thrown instanceof Interrupted ? thrown.left : undefined))
    }
    if (error instanceof Errors.ExitError) throw error
    const ctor = this.ctor as typeof BaseCommand
    const failure = failureOf(error, Object.keys({...ctor.baseFlags, ...ctor.flags, ...(ctor.enableJsonFlag ? {json: true} : {})}))
    this.logToStderr(`error: ${failure.message}`)
    if (failure.code === 'internal' && process.env.EDGEWORKERS_DEBUG) this.logToStderr(error.stack ?? '')
    if (this.jsonEnabled()) this.printJsonLine({error: failure})
    return this.exit(failure.exitCode)
  }
}
