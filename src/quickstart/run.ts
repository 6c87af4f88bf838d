// `edgeworkers quickstart`: the main job end to end on embedded defaults — a SQLite store, a local
// edge host on workerd, the hello fixture deployed, served and fetched. It works in its own
// sandbox (<data dir>/quickstart), which every run starts afresh: retirement is permanent and
// department ids are never reused, so only a fresh sandbox lets each run deploy the same `hello`.
// It stops the host it started unless asked to keep it running.
import {existsSync} from 'node:fs'
import {readdir, rm, writeFile} from 'node:fs/promises'
import path from 'node:path'
import pino from 'pino'
import {request} from 'undici'
import {settingsSchema, type Settings} from '../config/schema.js'
import {createEngine} from '../engine/context.js'
import {onPremHosts} from '../provider/onprem/hosts.js'
import {deployWorker, type DeployOutcome} from '../engine/deploy/deploy-worker.js'
import {orphanReport, type OrphanReport} from '../engine/retire/orphan-report.js'
import {retireDepartment, type RetireOutcome} from '../engine/retire/retire-department.js'
import {hostPairingCode, startHost, type RunningHost} from '../edge-host/host.js'
import {pairWithHost} from '../provider/onprem/pairing.js'
import {KitError} from '../errors.js'
import {packagePath} from '../package-root.js'
import {openStore} from '../store/index.js'
import {createPrivateDir} from '../util/private-files.js'
import {redactingLogOptions} from '../util/log-redaction.js'

export const QUICKSTART_COMPANY = 'quickstart'
export const QUICKSTART_DEPARTMENT = 'hello'
/** Marks a directory as the quickstart's own, so a rerun may empty it. */
const SANDBOX_MARKER = '.edgeworkers-quickstart'

/** Where a quickstart with these settings works. */
export function quickstartDir(settings: Settings): string {
  return path.join(settings.data_dir, 'quickstart')
}
const HELLO_FIXTURE = packagePath('fixtures', 'workers', 'hello')

export type QuickstartStep = 'store' | 'host' | 'pair' | 'tenant' | 'deploy' | 'fetch' | 'retire' | 'orphan-report'

export interface QuickstartResult {
  dataDir: string
  store: string
  scope: string
  publicUrl: string
  adminUrl: string
  companyId: string
  departmentId: string
  deploy: DeployOutcome
  response: {status: number; body: string}
  retire: RetireOutcome
  /** The Worker's URL right after the retirement (404 worker_not_found). */
  retiredResponse: {status: number; body: string}
  orphanReport: OrphanReport
  hostLog: string
  /** Still serving (keepRunning); the caller stops it. */
  host: RunningHost | null
}

export async function runQuickstart(
  base: Settings,
  options: {keepRunning: boolean; onStep?: (step: QuickstartStep, detail?: string) => void},
): Promise<QuickstartResult> {
  const step = options.onStep ?? (() => {})
  const dataDir = quickstartDir(base)
  await freshSandbox(dataDir)
  const settings: Settings = settingsSchema.parse({...base, data_dir: dataDir, store: {...base.store, url: ''}, provider: {...base.provider, scope: ''}})

  step('store')
  const store = await openStore(settings)
  let host: RunningHost | null = null
  try {
    await store.migrate()

    step('host')
    const hostDir = path.join(dataDir, 'host')
    const hostLog = path.join(dataDir, 'host.log')
    host = await startHost({
      dataDir: hostDir,
      settings: {listen: '127.0.0.1:0', admin_listen: '127.0.0.1:0', shards: 1},
      logger: pino(
        {level: 'info', timestamp: pino.stdTimeFunctions.isoTime, ...redactingLogOptions()},
        pino.destination({dest: hostLog, mkdir: true, mode: 0o600, sync: false}),
      ),
    })

    step('pair', host.scope)
    const code = host.issuedPairingCode ?? hostPairingCode(hostDir, {rotate: true})
    await store.kit.savePairing(await pairWithHost(host.adminUrl, code, settings.provider.connect_timeout_ms + settings.provider.read_timeout_ms))

    step('tenant')
    await store.tenants.createCompany({id: QUICKSTART_COMPANY, name: 'Quickstart Inc.'})
    const departmentId = QUICKSTART_DEPARTMENT
    await store.tenants.createDepartment({id: departmentId, company_id: QUICKSTART_COMPANY, name: 'Hello'})

    step('deploy')
    const engine = await createEngine(store, settings, onPremHosts)
    const deploy = await deployWorker(engine, {projectDir: HELLO_FIXTURE, departmentId, wait: true})

    step('fetch', deploy.url ?? undefined)
    const url = deploy.url ?? `${host.publicUrl}/${deploy.scriptName}/`
    const response = await fetchText(url)

    step('retire', deploy.scriptName)
    const retire = await retireDepartment(engine, {departmentId, companyId: QUICKSTART_COMPANY})
    const retiredResponse = await fetchText(url)

    step('orphan-report')
    const report = await orphanReport(engine)
    const result: QuickstartResult = {
      dataDir,
      store: store.location,
      scope: host.scope,
      publicUrl: host.publicUrl,
      adminUrl: host.adminUrl,
      companyId: QUICKSTART_COMPANY,
      departmentId,
      deploy,
      response,
      retire,
      retiredResponse,
      orphanReport: report,
      hostLog,
      host: options.keepRunning ? host : null,
    }
    return result
  } finally {
    await store.close()
    if (host && !options.keepRunning) await host.stop()
  }
}

/** Empties the quickstart's own sandbox (or creates it); refuses a directory it did not make. */
async function freshSandbox(dir: string): Promise<void> {
  if (existsSync(dir)) {
    const entries = await readdir(dir)
    if (entries.length > 0 && !entries.includes(SANDBOX_MARKER)) {
      throw new KitError('usage', `${dir} exists and is not a quickstart sandbox; move it away or pick another --data-dir`)
    }
    await rm(dir, {recursive: true, force: true})
  }
  createPrivateDir(dir)
  await writeFile(path.join(dir, SANDBOX_MARKER), 'Made by `edgeworkers quickstart`; emptied by its next run.\n', {mode: 0o600})
}

async function fetchText(url: string): Promise<{status: number; body: string}> {
  const response = await request(url, {headersTimeout: 10_000, bodyTimeout: 10_000})
  return {status: response.statusCode, body: await response.body.text()}
}
