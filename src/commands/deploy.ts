import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {BaseCommand} from '../cli/base-command.js'
import {withProgress} from '../cli/progress.js'
import {deployExitCode} from '../cli/exit-codes.js'
import {table} from '../cli/table.js'
import {deployWorker} from '../engine/deploy/deploy-worker.js'
import {interruptedDeployLeft} from '../engine/deploy/interrupted.js'
import {planDeploy, type DeployPlan} from '../engine/deploy/plan.js'
import type {Engine} from '../engine/context.js'

export default class Deploy extends BaseCommand<typeof Deploy> {
  static override description = `Build a Worker project into a version, enqueue its deploy and (by default) run it now.

The project directory holds edgeworker.json (main module, modules of any workerd type, compatibility
date and flags, vars, static data, Durable Objects, service bindings, builder policy, dependencies; see
the README's "Project format"), or a wrangler config (wrangler.toml, wrangler.jsonc or wrangler.json;
edgeworker.json wins when both exist): TypeScript, JSX and npm dependencies are bundled with esbuild,
[env.<name>] sections apply with --env, keys with no meaning on-prem are listed in one warning and
bindings the host cannot provide (KV, R2, D1, queues, …) are refused. The Worker must start in a
throwaway workerd before anything is written. --dry-run builds and prints what would be deployed
without touching the store or the host. --percentage P starts a gradual deployment: the new version
serves P % of requests beside the version served now (see versions deploy; deployments promote ends it).

Exit codes: 0 completed (or planned, with --dry-run), 7 deferred or left to a later pass, 8 failed,
9 uncertain, 2 bad project (manifest, module or flag) or a split refused, 5 unknown department, 6 refused by a gate or a
service binding, or superseded (a newer deploy of the same Worker wins); 130 SIGINT, 143 SIGTERM: the line
says whether its outbox row stays queued (a reconcile pass completes it) or was not queued at all.`
  static override examples = [
    '<%= config.bin %> deploy ./my-worker --department acme-sales',
    '<%= config.bin %> deploy ./my-wrangler-project --env staging  # department: [env.staging.edgeworkers], default <department>-staging',
    '<%= config.bin %> deploy ./my-wrangler-project/src/index.ts --department acme-sales',
    '<%= config.bin %> deploy ./my-wrangler-project --wrangler-config ./my-wrangler-project/worker-a.wrangler.jsonc --department acme-sales',
    '<%= config.bin %> deploy ./my-worker --dry-run',
    '<%= config.bin %> deploy ./my-worker --department acme-sales --no-wait',
    '<%= config.bin %> deploy ./my-worker --department acme-sales --json',
  ]
  static override args = {
    // Checked by the build (one line, exit 2), not by oclif's `exists`, which exits 1.
    'project-dir': Args.string({
      required: true,
      description: "Worker project directory (edgeworker.json or a wrangler config), or a wrangler project's entry module (wrangler's [script])",
    }),
  }
  static override enableJsonFlag = true
  static override flags = {
    department: Flags.string({description: "Department id whose Worker this is (wrangler projects: default the [edgeworkers] table's department)"}),
    env: Flags.string({
      description:
        "wrangler projects: apply the [env.<name>] section, deployed as its own Worker: in the env's [edgeworkers] department, default <department>-<name>",
    }),
    'onto-production': Flags.boolean({
      dependsOn: ['env'],
      description: "with --env: deploy the env onto the production department (the top level's [edgeworkers] department), replacing its Worker",
    }),
    main: Flags.string({description: "wrangler projects: the entry module instead of the config's main (relative to the current directory)"}),
    // wrangler's -c/--config; --config is already the kit's own settings file.
    'wrangler-config': Flags.string({description: "wrangler projects: the wrangler config file, any name (wrangler's -c; relative to the current directory)"}),
    bundle: Flags.boolean({allowNo: true, description: "wrangler projects: --no-bundle deploys the modules as they are (wrangler's no_bundle)"}),
    'builder-policy': Flags.string({description: 'wrangler projects: department-worker-project-v2.N (default: the [edgeworkers] table, else the newest)'}),
    'dry-run': Flags.boolean({description: 'Build and print what would be deployed; write nothing, call nothing'}),
    wait: Flags.boolean({default: true, allowNo: true, description: 'Run the deploy task now and wait for it (--no-wait leaves it to the next pass)'}),
    message: Flags.string({description: 'What this version is, recorded on it (versions list|show), with you as its author'}),
    tag: Flags.string({description: 'A tag recorded on the version (e.g. a release name)'}),
    percentage: Flags.integer({
      min: 0,
      max: 100,
      description:
        "A gradual deployment: the new version serves this share of requests beside the version served now (wrangler versions deploy's <version>@<percentage>)",
    }),
    'operation-settings-digest': Flags.string({description: 'SHA-256 (64 hex) of the operation settings this deploy carries'}),
  }

  private deployEngine?: Engine
  private outboxId: string | null = null

  /** The deploy is not stopped: its row stays queued and the one line says when it completes. */
  protected override interruptNote(): string | Promise<string> {
    if (!this.deployEngine) return 'nothing was written'
    return interruptedDeployLeft(this.deployEngine, this.outboxId)
  }

  async run() {
    const json = this.jsonEnabled()
    const source = {
      env: this.flags.env,
      noBundle: this.flags.bundle === false ? true : undefined,
      builderPolicy: this.flags['builder-policy'],
      main: this.flags.main,
      config: this.flags['wrangler-config'],
    }
    if (this.flags['dry-run']) {
      const plan = await planDeploy(this.settings, {projectDir: this.args['project-dir'], source})
      return this.respond(plan, () => renderPlan(plan))
    }
    const engine = await this.engine({interactive: !json})
    this.deployEngine = engine
    const result = await withProgress(
      'Deploy',
      json,
      (report) =>
        deployWorker(
          engine,
          {
            projectDir: this.args['project-dir'],
            departmentId: this.flags.department,
            wait: this.flags.wait,
            operationSettingsDigest: this.flags['operation-settings-digest'],
            ontoProduction: this.flags['onto-production'],
            source,
            notes: {message: this.flags.message, tag: this.flags.tag, author: this.operator.id},
            percentage: this.flags.percentage,
          },
          {onStage: report, onEnqueued: (outboxId) => (this.outboxId = outboxId)},
        ),
      (outcome) => `Deploy: ${outcome.state}`,
    )
    if (!json) for (const warning of result.warnings) this.logToStderr(`warning: ${warning}`)
    return this.respond(
      result,
      () =>
        [
          `worker       ${result.scriptName}`,
          `version      ${result.versionId}${result.reused ? ' (reused: same release generation)' : ''}`,
          `generation   ${result.releaseGeneration}`,
          `state        ${result.state}${result.code ? ` (${result.code})` : ''}`,
          ...(result.message ? [`detail       ${result.message}`] : []),
          ...(result.url ? [`url          ${result.url}`] : []),
          `outbox row   ${result.outboxId}${result.duplicate ? ' (duplicate enqueue: existing row)' : ''}`,
        ].join('\n'),
      deployExitCode[result.state],
    )
  }
}

function renderPlan(plan: DeployPlan): string {
  const list = (items: string[]) => (items.length > 0 ? items.join(', ') : '-')
  return [
    `dry run: nothing was written and the host was not called`,
    ...plan.warnings.map((warning) => `warning      ${warning}`),
    `source       ${plan.source.file}${plan.source.env ? ` [env.${plan.source.env}]` : ''}${plan.source.kind === 'wrangler' ? (plan.source.bundled ? ' (bundled with esbuild)' : ' (no_bundle)') : ''}`,
    `name         ${plan.name}`,
    `policy       ${plan.builderPolicy}`,
    `date         ${plan.compatibilityDate}`,
    `flags        ${list(plan.compatibilityFlags)}`,
    `vars         ${list(plan.bindings.vars)}${plan.bindings.staticData ? ' (+ STATIC_DATA)' : ''}`,
    `objects      ${list(plan.bindings.durableObjects.map((object) => `${object.binding} → ${object.className}`))}`,
    `crons        ${list(plan.bindings.crons)}`,
    `kv           ${list(plan.bindings.kvNamespaces.map((namespace) => `${namespace.binding} → ${namespace.id}`))}`,
    `d1           ${list(plan.bindings.d1Databases.map((database) => `${database.binding} → ${database.id}`))}`,
    `r2           ${list(plan.bindings.r2Buckets.map((bucket) => `${bucket.binding} → ${bucket.bucketName}`))}`,
    `queues       ${list([
      ...plan.bindings.queues.producers.map((producer) => `${producer.binding} → ${producer.queue}`),
      ...plan.bindings.queues.consumers.map((consumer) => `consumes ${consumer.queue}`),
    ])}`,
    `services     ${list(plan.bindings.services.map((service) => `${service.binding} → department ${service.department}`))}`,
    `packages     ${list(Object.entries(plan.dependencies).map(([name, version]) => `${name}@${version}`))}`,
    table(
      ['MODULE', 'TYPE', 'BYTES'],
      plan.modules.map((module) => [module.name, module.type, String(module.bytes)]),
      'none',
    ),
    `bundle       ${plan.bundleBytes} bytes; project archive ${plan.projectArchiveBytes} bytes`,
    ...(plan.assets
      ? [`assets       ${plan.assets.files} files, ${plan.assets.bytes} bytes${plan.assets.binding ? ` (env.${plan.assets.binding})` : ''}`]
      : []),
    `generation   ${plan.releaseGeneration}`,
    ...Object.entries(plan.digests).map(([name, digest]) => `${name.padEnd(12)} ${digest}`),
  ].join('\n')
}
