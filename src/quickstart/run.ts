// `edgeworkers quickstart`: the main job end to end on embedded defaults — a SQLite store, a local
// edge host on workerd, the hello fixture deployed, served and fetched. It works in its own
// sandbox (<data dir>/quickstart), is idempotent (a rerun reuses the store, the pairing, the
// tenant and the version) and stops the host it started unless asked to keep it running.
import {mkdir} from 'node:fs/promises'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import pino from 'pino'
import {request} from 'undici'
import {settingsSchema, type Settings} from '../config/schema.js'
import {createEngine} from '../engine/context.js'
import {deployWorker, type DeployOutcome} from '../engine/deploy/deploy-worker.js'
import {hostPairingCode, startHost, type RunningHost} from '../edge-host/host.js'
import {pairWithHost} from '../provider/onprem/pairing.js'
import {openStore, type Store} from '../store/index.js'

export const QUICKSTART_COMPANY = 'quickstart'
export const QUICKSTART_DEPARTMENT = 'hello'
const HELLO_FIXTURE = fileURLToPath(new URL('../../fixtures/workers/hello', import.meta.url))

export type QuickstartStep = 'store' | 'host' | 'pair' | 'tenant' | 'deploy' | 'fetch'

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
  await mkdir(dataDir, {recursive: true})
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
      logger: pino({level: 'info', timestamp: pino.stdTimeFunctions.isoTime}, pino.destination({dest: hostLog, mkdir: true, sync: false})),
    })

    step('pair', host.scope)
    await ensurePaired(store, host, hostDir, settings)

    step('tenant')
    if (!(await store.tenants.getCompany(QUICKSTART_COMPANY))) await store.tenants.createCompany({id: QUICKSTART_COMPANY, name: 'Quickstart Inc.'})
    if (!(await store.tenants.getDepartment(QUICKSTART_DEPARTMENT))) {
      await store.tenants.createDepartment({id: QUICKSTART_DEPARTMENT, company_id: QUICKSTART_COMPANY, name: 'Hello'})
    }

    step('deploy')
    const engine = await createEngine(store, settings)
    const deploy = await deployWorker(engine, {projectDir: HELLO_FIXTURE, departmentId: QUICKSTART_DEPARTMENT, wait: true})

    step('fetch', deploy.url ?? undefined)
    const url = deploy.url ?? `${host.publicUrl}/${deploy.scriptName}/`
    const response = await request(url, {headersTimeout: 10_000, bodyTimeout: 10_000})
    const result: QuickstartResult = {
      dataDir,
      store: store.location,
      scope: host.scope,
      publicUrl: host.publicUrl,
      adminUrl: host.adminUrl,
      companyId: QUICKSTART_COMPANY,
      departmentId: QUICKSTART_DEPARTMENT,
      deploy,
      response: {status: response.statusCode, body: await response.body.text()},
      hostLog,
      host: options.keepRunning ? host : null,
    }
    return result
  } finally {
    await store.close()
    if (host && !options.keepRunning) await host.stop()
  }
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
