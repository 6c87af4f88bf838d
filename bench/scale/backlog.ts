// The kit side of bench/scale: WORKERS departments with a Worker and a version each, and backlogs of
// due deploy rows over them, round-robin (a backlog of many departments).
import {settingsSchema} from '../../src/config/schema.js'
import {openStore, scriptNameFor, type Store} from '../../src/store/index.js'
import {versionWithoutArtifacts} from '../support/passes.js'

const WORKERS = 100

/** WORKERS departments, each with its Worker and one version: what the kit's deploy rows point at. */
export async function seedWorkers(store: Store, company: string): Promise<void> {
  await store.transaction(async (tx) => {
    await tx.tenants.createCompany({id: company, name: 'Bench'})
    for (let w = 0; w < WORKERS; w++) {
      const department = `${company}-${w}`
      await tx.tenants.createDepartment({id: department, company_id: company, name: department})
      const worker = await tx.workers.create({company_id: company, department_id: department, script_name: scriptNameFor(company, department), status: 'new'})
      await tx.workers.createVersion(versionWithoutArtifacts(worker.id))
    }
  })
}

/** `rows` due deploy rows of `scope` handed to the passes, round-robin over the company's Workers (setup, not timed). */
export async function fillOutbox(options: {url: string; workDir: string; scope: string; company: string; label: string; rows: number}): Promise<void> {
  const {url, workDir, scope, company, label, rows} = options
  const store = await openStore(settingsSchema.parse({data_dir: workDir, store: {url}}))
  try {
    const workers = await Promise.all(
      Array.from({length: WORKERS}, async (_, w) => {
        const worker = (await store.workers.getByDepartment(`${company}-${w}`))!
        return {worker: worker.id, department: worker.department_id, script: worker.script_name, version: (await store.workers.listVersions(worker.id))[0]!.id}
      }),
    )
    for (let start = 0; start < rows; start += 1_000) {
      await store.transaction(async (tx) => {
        for (let i = start; i < Math.min(rows, start + 1_000); i++) {
          const w = workers[i % workers.length]!
          await tx.outbox.enqueue({
            operation: 'deploy',
            dedupe_key: `deploy:${label}:${i}`,
            dispatch_namespace: scope,
            company_id: company,
            department_id: w.department,
            worker_id: w.worker,
            version_id: w.version,
            script_name: w.script,
            payload: {releaseGeneration: 'rg', baseRevision: i},
          })
        }
      })
    }
  } finally {
    await store.close()
  }
}
