// The build-time check: a version must start under workerd before anything is written or uploaded.
// It runs the same validation sandbox the edge host runs for every upload (a throwaway workerd, the
// Worker behind the check module that insists on a fetch handler), so a syntax or import error, a
// missing fetch handler or an unknown compatibility flag is a one-line `usage` error here rather than
// a failed deploy. The installed workerd is the authority on flags: there is no table to go stale.
// The sandbox runs in the paired host's mode (workerd's --experimental or not) when the deploy could
// ask the host; otherwise in experimental mode, and whether experimental flags may run is the host's call.
import {randomUUID} from 'node:crypto'
import {mkdir, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {KitError} from '../../errors.js'
import {renderValidationConfig} from '../../workerd/config.js'
import {refusalProblems} from '../../workerd/refusal.js'
import {runValidationSandbox} from '../../workerd/sandbox.js'
import {validationCandidate} from '../../workerd/script.js'
import {wireBindingOf} from '../../protocol/worker-bindings.js'
import type {BundleModule} from './bundle.js'
import {MANIFEST_FILE, type WorkerManifest} from './manifest.js'
import {queueConsumersOf, scriptModulesOf, workerBindingsOf} from './worker-config.js'

/** The sandbox's service name for the Worker; any name will do, workerd's errors are prefixed with it. */
const SCRIPT = 'worker'
const START_TIMEOUT_MS = 30_000
const SERVICE_WORKER_SYNTAX = /addEventListener\(\s*["'`]fetch["'`]/

/** Throws a one-line KitError('usage') when the Worker does not start. */
export async function checkWorkerStarts(
  manifest: WorkerManifest,
  bundle: {mainModule: string; modules: readonly BundleModule[]},
  options: {experimental: boolean},
): Promise<void> {
  const dir = path.join(tmpdir(), `edgeworkers-check-${randomUUID()}`)
  // Service targets are resolved at deploy time; the sandbox never calls them.
  const services = new Map((manifest.services ?? []).map((service) => [service.binding, `dw-${'0'.repeat(48)}`]))
  const candidate = validationCandidate(
    {
      name: SCRIPT,
      releaseGeneration: 'check',
      mainModule: bundle.mainModule,
      compatibilityDate: manifest.compatibilityDate,
      compatibilityFlags: manifest.compatibilityFlags ?? [],
      modules: scriptModulesOf(manifest, bundle.modules),
      bindings: workerBindingsOf(manifest, services).map(wireBindingOf),
      crons: manifest.crons ?? [],
      queueConsumers: queueConsumersOf(manifest),
    },
    null,
  )
  await mkdir(path.join(dir, 'modules'), {recursive: true, mode: 0o700})
  for (const [sha256, content] of candidate.modules) await writeFile(path.join(dir, 'modules', sha256), content, {mode: 0o600})
  const render = (socketAddress: (service: string) => string) =>
    renderValidationConfig([candidate.script], {
      modulePath: (sha256) => `modules/${sha256}`,
      egressAllow: ['public'],
      serviceBindingAddress: `unix:${path.join(dir, 'services.sock')}`,
      socketAddress,
    })
  const outcome = await runValidationSandbox(dir, [SCRIPT], render, {startTimeoutMs: START_TIMEOUT_MS, experimental: options.experimental})
  if (outcome.ok) return
  const problems = refusalProblems(outcome.error, SCRIPT)
  const unknownFlag = problems.map((problem) => /^No such compatibility flag: (\S+)/.exec(problem)?.[1]).find(Boolean)
  if (unknownFlag) throw new KitError('usage', `${MANIFEST_FILE}: key "compatibilityFlags": workerd has no compatibility flag ${JSON.stringify(unknownFlag)}`)
  // workerd runs service-worker syntax (serviceWorkerScript), but its Worker Loader (host.code_loading =
  // "loader") takes only modules, and a module gets no bindings as globals: both modes refuse it.
  const main = bundle.modules.find((module) => module.name === bundle.mainModule)
  if (main && SERVICE_WORKER_SYNTAX.test(main.content.toString('utf8'))) {
    throw new KitError(
      'usage',
      `the main module ${bundle.mainModule} is a service-worker script (addEventListener("fetch", …)); Workers here are ES modules: write export default {fetch(request, env, ctx) {…}} and read bindings from env, not from globals`,
    )
  }
  throw new KitError('usage', `the Worker does not start under workerd: ${problems.join('; ')}`)
}
