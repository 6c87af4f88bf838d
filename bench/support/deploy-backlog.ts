// What the deploy-backlog benchmarks share (bench/backlog, bench/scale/passes): a one-line Worker
// project, two ways to queue a backlog (`deploy --no-wait`'s engine call per row; or each version
// built once and committed for many Workers), counting the host's uploads and shard swaps, and the
// row-by-row check that every row settled exactly once.
import {mkdtempSync, writeFileSync} from 'node:fs'
import path from 'node:path'
import {settingsSchema} from '../../src/config/schema.js'
import {createEngine} from '../../src/engine/context.js'
import {onPremHosts} from '../../src/provider/onprem/hosts.js'
import {deployWorker} from '../../src/engine/deploy/deploy-worker.js'
import {enqueueDeploy} from '../../src/engine/deploy/enqueue.js'
import {versionInputOf} from '../../src/engine/deploy/submit.js'
import {buildProject} from '../../src/engine/project/build.js'
import {requireProvider} from '../../src/engine/provider.js'
import {DEPLOY_AUDIT_ACTIONS, newId, scriptNameFor, type Store} from '../../src/store/index.js'

/** A project dir under `parent` whose Worker answers `text`. */
/** `manifest`: more edgeworker.json fields (e.g. crons: the module has a scheduled() that does nothing). */
export function project(parent: string, text: string, manifest: Record<string, unknown> = {}): string {
  const dir = mkdtempSync(path.join(parent, 'project-'))
  writeFileSync(
    path.join(dir, 'edgeworker.json'),
    JSON.stringify({
      name: 'backlog',
      main: 'index.js',
      modules: ['index.js'],
      compatibilityDate: '2026-11-01',
      builderPolicy: 'department-worker-project-v2.9',
      staticData: {},
      dependencies: {},
      ...manifest,
    }),
  )
  writeFileSync(path.join(dir, 'index.js'), `export default { fetch() { return new Response(${JSON.stringify(text)}) }, scheduled() {} }\n`)
  return dir
}

/**
 * Queues `versions` versions of `workers` Workers of company `label` as `deploy --no-wait` does
 * (build, commit the version, enqueue its row for the passes), version by version, up to
 * `parallel` Workers at once. Returns department → the text its newest version answers.
 */
export async function queueBacklog(
  store: Store,
  options: {dataDir: string; projectsDir: string; url: string; label: string; workers: number; versions: number; parallel?: number},
): Promise<Map<string, string>> {
  const {dataDir, projectsDir, url, label, workers, versions, parallel = 1} = options
  const engine = await createEngine(store, settingsSchema.parse({data_dir: dataDir, store: {url}}), onPremHosts)
  await store.tenants.createCompany({id: label, name: label})
  const departments = Array.from({length: workers}, (_, w) => `${label}-${w}`)
  for (const [w, department] of departments.entries()) await store.tenants.createDepartment({id: department, company_id: label, name: `${w}`})
  const newest = new Map<string, string>()
  for (let v = 0; v < versions; v++) {
    for (let start = 0; start < workers; start += parallel) {
      await Promise.all(
        departments.slice(start, start + parallel).map(async (department) => {
          const text = `${department} v${v}`
          const outcome = await deployWorker(engine, {projectDir: project(projectsDir, text), departmentId: department, wait: false})
          if (outcome.state !== 'pending') throw new Error(`enqueue of ${text}: ${outcome.state}`)
          newest.set(department, text)
        }),
      )
    }
  }
  return newest
}

/**
 * The same backlog shape, cheaply: each of `versions` projects (answering `backlog v<n>`) is built
 * once — a build starts a throwaway workerd, ~0.5 s — and its artifacts stored; then every Worker
 * gets that release as a new version (the store's version commit, as `deploy` makes it) and a deploy
 * row through the engine's enqueue (`enqueueDeploy`: gates, dedupe key, scope), version by version,
 * `parallel` Workers at once. Returns department → the text its newest version answers.
 */
export async function queueSharedBacklog(
  store: Store,
  options: {dataDir: string; projectsDir: string; url: string; label: string; workers: number; versions: number; parallel: number},
): Promise<Map<string, string>> {
  const {dataDir, projectsDir, url, label, workers, versions, parallel} = options
  const engine = await createEngine(store, settingsSchema.parse({data_dir: dataDir, store: {url}}), onPremHosts)
  const {scope} = await requireProvider(engine, 'queue a backlog')
  const builds = []
  for (let v = 0; v < versions; v++) {
    const built = await buildProject(project(projectsDir, `backlog v${v}`), engine.settings.deploy)
    await engine.artifacts.put('project', built.projectArchive)
    await engine.artifacts.put('bundle', built.bundle)
    builds.push(built)
  }
  await store.tenants.createCompany({id: label, name: label})
  const rows = []
  for (let w = 0; w < workers; w++) {
    const department = `${label}-${w}`
    await store.tenants.createDepartment({id: department, company_id: label, name: `${w}`})
    rows.push(await store.workers.create({company_id: label, department_id: department, script_name: scriptNameFor(label, department), status: 'new'}))
  }
  for (const built of builds) {
    for (let start = 0; start < workers; start += parallel) {
      await Promise.all(
        rows.slice(start, start + parallel).map(async (worker) => {
          const version = await store.workers.createVersion(versionInputOf(newId(), worker.id, built))
          const {row} = await enqueueDeploy(engine, {worker, version, scope})
          if (row.status !== 'pending') throw new Error(`enqueue of ${worker.department_id} ${built.releaseGeneration}: ${row.status}`)
        }),
      )
    }
  }
  return new Map(rows.map((worker) => [worker.department_id, `backlog v${versions - 1}`]))
}

/** Counts the host's `script uploaded` lines per script@release and its shard swaps (`shard serving`). */
export class HostCounter {
  uploads = 0
  swaps = 0
  readonly perRelease = new Map<string, number>()
  record = (entry: Record<string, unknown>): void => {
    if (entry.msg === 'shard serving') this.swaps++
    if (entry.msg !== 'script uploaded') return
    this.uploads++
    const release = `${String(entry.script)}@${String(entry.releaseGeneration)}`
    this.perRelease.set(release, (this.perRelease.get(release) ?? 0) + 1)
  }
}

/**
 * Every deploy row terminal and processed exactly once: completed with one `deployed` audit row, or
 * yielded (`cancelled`) with one `deploy_superseded` audit row; and no release uploaded twice.
 */
export async function expectEachRowSettledOnce(store: Store, perRelease: Map<string, number>): Promise<void> {
  const rows = await store.outbox.list({operation: 'deploy', limit: 1_000_000})
  const audits = new Map<string, string[]>()
  for (const action of Object.values(DEPLOY_AUDIT_ACTIONS)) {
    for (const audit of await store.audit.list({action, limit: 1_000_000}))
      audits.set(String(audit.facts.outbox_id), [...(audits.get(String(audit.facts.outbox_id)) ?? []), action])
  }
  for (const row of rows) {
    const expected = row.status === 'completed' ? DEPLOY_AUDIT_ACTIONS.deployed : row.status === 'cancelled' ? DEPLOY_AUDIT_ACTIONS.superseded : null
    const actual = audits.get(row.id) ?? []
    if (!expected || actual.length !== 1 || actual[0] !== expected)
      throw new Error(`row ${row.id} ended ${row.status} with audit rows ${JSON.stringify(actual)}`)
  }
  const twice = [...perRelease].filter(([, count]) => count > 1)
  if (twice.length > 0) throw new Error(`uploaded more than once: ${JSON.stringify(twice)}`)
}

/** Fails unless every department's Worker serves the text of its newest version (through the data plane). */
export async function expectNewestServed(store: Store, publicUrl: string, newest: Map<string, string>): Promise<void> {
  for (const [department, text] of newest) {
    const worker = await store.workers.getByDepartment(department)
    const body = await (await fetch(`${publicUrl}/${worker!.script_name}/`)).text()
    if (body !== text) throw new Error(`${department} serves ${JSON.stringify(body)}, not its newest ${JSON.stringify(text)}`)
  }
}
