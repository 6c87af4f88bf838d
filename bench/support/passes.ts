// What the pass benchmarks share: running one measurement on each backend (SQLite in a temp dir, then
// PostgreSQL on a scratch database), a dispatch that does to a row what the deploy task does without
// a host, and the one Worker and version their outbox rows point at.
import path from 'node:path'
import {leaseDeployRow} from '../../src/engine/deploy/task.js'
import type {DispatchDeploy} from '../../src/engine/pass/index.js'
import {scriptNameFor, type Backend, type Store, type VersionCreateInput} from '../../src/store/index.js'
import {createDatabase, dropDatabase, postgresServer} from './store-baseline.js'

/** `measure` on a SQLite file under `workDir`, then on a scratch PostgreSQL database named `name`. */
export async function onEachBackend<T>(workDir: string, name: string, measure: (backend: Backend, url: string) => Promise<T>): Promise<T[]> {
  const results = [await measure('sqlite', path.join(workDir, `${name}.sqlite`))]
  const postgres = await postgresServer()
  try {
    results.push(await measure('postgres', await createDatabase(postgres.adminUrl, name)))
    await dropDatabase(postgres.adminUrl, name)
  } finally {
    await postgres.stop()
  }
  return results
}

/** What the deploy task does to the row, without a host: take its lease (the claim's, for a row a sweep claimed), settle it completed. */
export function leaseAndSettle(scope: string): DispatchDeploy {
  return async (engine, args) => {
    const lease = await leaseDeployRow(engine, args, scope)
    if (lease.disposition !== 'acquired') return {outcome: 'skipped', disposition: lease.disposition}
    await engine.store.outbox.settle(args.outboxId, lease.row.lease_token!, {status: 'completed'})
    return {outcome: 'completed', versionId: '', releaseGeneration: '', scriptName: '', reconciled: false}
  }
}

export interface BenchWorker {
  id: string
  script_name: string
  versionId: string
}

/** Company `bench`, department `bench-ops`, its Worker and one built version (no artifacts behind it). */
export async function seedBenchWorker(store: Store): Promise<BenchWorker> {
  await store.tenants.createCompany({id: 'bench', name: 'Bench'})
  await store.tenants.createDepartment({id: 'bench-ops', company_id: 'bench', name: 'Ops'})
  const worker = await store.workers.create({company_id: 'bench', department_id: 'bench-ops', script_name: scriptNameFor('bench', 'bench-ops'), status: 'new'})
  const version = await store.workers.createVersion(versionWithoutArtifacts(worker.id))
  return {id: worker.id, script_name: worker.script_name, versionId: version.id}
}

/** A built version of the Worker with no artifacts behind it: what a deploy row of a task that uploads nothing points at. */
export function versionWithoutArtifacts(workerId: string, releaseGeneration = 'rg'): VersionCreateInput {
  return {
    worker_id: workerId,
    release_generation: releaseGeneration,
    builder_policy: 'department-worker-project-v2.9',
    project_artifact_key: 'unused',
    project_digest: 'unused',
    bundle_artifact_key: 'unused',
    bundle_digest: 'unused',
    manifest: {},
    receipt: {},
  }
}
