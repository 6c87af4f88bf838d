// `edgeworkers quickstart`: the main job end to end on embedded defaults — a SQLite store, a local
// edge host on workerd, the hello fixture deployed, served and fetched. It works in its own
// sandbox (<data dir>/quickstart), is idempotent (a rerun reuses the store, the pairing, the
// tenant and the version) and stops the host it started unless asked to keep it running.
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import pino from 'pino'
import {request} from 'undici'
import {settingsSchema, type Settings} from '../config/schema.js'
import {createEngine} from '../engine/context.js'
import {deployWorker, type DeployOutcome} from '../engine/deploy/deploy-worker.js'
import {orphanReport, type OrphanReport} from '../engine/retire/orphan-report.js'
import {retireDepartment, type RetireOutcome} from '../engine/retire/retire-department.js'
import {hostPairingCode, startHost, type RunningHost} from '../edge-host/host.js'
import {pairWithHost} from '../provider/onprem/pairing.js'
import {openStore, type Store} from '../store/index.js'
import {createPrivateDir} from '../util/private-files.js'
import {redactingLogOptions} from '../util/log-redaction.js'

export const QUICKSTART_COMPANY = 'quickstart'
/** Each run retires its department, and ids are never reused: run N uses hello, hello-2, … hello-N. */
export const QUICKSTART_DEPARTMENT = 'hello'
const HELLO_FIXTURE = fileURLToPath(new URL('../../fixtures/workers/hello', import.meta.url))

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
  const dataDir = path.join(base.data_dir, 'quickstart')
  createPrivateDir(dataDir)
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
      logger: pino({level: 'info', timestamp: pino.stdTimeFunctions.isoTime, ...redactingLogOptions()}, pino.destination({dest: hostLog, mkdir: true, sync: false})),
    })

    step('pair', host.scope)
    await ensurePaired(store, host, hostDir, settings)

    step('tenant')
    if (!(await store.tenants.getCompany(QUICKSTART_COMPANY))) await store.tenants.createCompany({id: QUICKSTART_COMPANY, name: 'Quickstart Inc.'})
    const departmentId = await liveQuickstartDepartment(store)

    step('deploy')
    const engine = await createEngine(store, settings)
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

/** The first department of the sequence hello, hello-2, … not yet deleted (created if need be). */
async function liveQuickstartDepartment(store: Store): Promise<string> {
  for (let run = 1; ; run++) {
    const id = run === 1 ? QUICKSTART_DEPARTMENT : `${QUICKSTART_DEPARTMENT}-${run}`
    const existing = await store.tenants.getDepartment(id)
    if (existing?.deleted_at === null) return id
    if (!existing) {
      await store.tenants.createDepartment({id, company_id: QUICKSTART_COMPANY, name: `Hello ${run}`})
      return id
    }
  }
}

async function fetchText(url: string): Promise<{status: number; body: string}> {
  const response = await request(url, {headersTimeout: 10_000, bodyTimeout: 10_000})
  return {status: response.statusCode, body: await response.body.text()}
}

/** Pairs on the first run; later runs only refresh the host URL (the port is picked anew). */
async function ensurePaired(store: Store, host: RunningHost, hostDir: string, settings: Settings): Promise<void> {
  const existing = await store.kit.getPairing(host.scope)
  const secret = existing && existing.unpaired_at === null ? await store.kit.pairingSecret(host.scope) : undefined
  if (existing && secret) {
    if (existing.host_url !== host.adminUrl) await store.kit.savePairing({...existing, host_url: host.adminUrl, shared_secret: secret})
    return
  }
  const code = host.issuedPairingCode ?? hostPairingCode(hostDir, {rotate: true})
  await store.kit.savePairing(await pairWithHost(host.adminUrl, code, settings.provider.connect_timeout_ms + settings.provider.read_timeout_ms))
}
