// 6 OS processes run reconcile passes at once over 2,000 due rows on one database — 1,000 deploys
// (a fifth of them expired leases) and 1,000 artifact cleanups — and every row is handled exactly
// once: each deploy dispatched once, each orphaned artifact deleted once.
//
// The deploy dispatch is a recording stand-in for the deploy task (it leases and settles the row,
// as the task does, without a host): what is under test is that the sweeps hand each row to one
// pass only, not the host. The cleanup lane runs for real on a FileArtifactStore.
import {spawn} from 'node:child_process'
import {mkdirSync, writeFileSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {expect, test} from 'vitest'
import {artifactKeyFor, FileArtifactStore} from '../../../src/artifacts/store.js'
import {sha256Hex} from '../../../src/canonical-json.js'
import {describeEachStore} from '../../support/stores.js'
import {SCOPE, seedWorker} from './support.js'

const RUNNER = fileURLToPath(new URL('./pass-runner.ts', import.meta.url))
const PROCESSES = 6
const DEPLOYS = 1_000
const EXPIRED_LEASES = 200
const CLEANUPS = 1_000

interface RunnerReport {
  owner: string
  dispatched: string[]
  deleted: string[]
}

function runRunner(url: string, dataDir: string, owner: string): Promise<{code: number | null; stdout: string; stderr: string}> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', RUNNER, url, dataDir, owner], {stdio: ['ignore', 'pipe', 'pipe']})
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk) => (stdout += chunk))
    child.stderr.on('data', (chunk) => (stderr += chunk))
    child.on('error', reject)
    child.on('close', (code) => resolve({code, stdout, stderr}))
  })
}

describeEachStore('concurrent reconcile passes', (t) => {
  test(`${PROCESSES} processes handle ${DEPLOYS + CLEANUPS} due rows exactly once`, {timeout: 300_000}, async () => {
    const dataDir = t.settings().data_dir
    const artifacts = await FileArtifactStore.open(dataDir)
    const {worker, version} = await seedWorker(t)
    // Written straight into the store's layout: put() makes each artifact durable, which set-up need not wait for.
    const keys = Array.from({length: CLEANUPS}, (_, i) => artifactKeyFor('bundle', sha256Hex(`orphan ${i}`)))
    for (const [i, key] of keys.entries()) {
      const file = path.join(dataDir, 'artifacts', ...key.split('/'))
      mkdirSync(path.dirname(file), {recursive: true})
      writeFileSync(file, `orphan ${i}`)
    }
    expect(await artifacts.get(keys[0]!, 100)).toEqual(Buffer.from('orphan 0'))
    await t.store.transaction(async (tx) => {
      for (let i = 0; i < DEPLOYS; i++) {
        const {row} = await tx.outbox.enqueue({
          operation: 'deploy',
          dedupe_key: `deploy:${worker.id}:${version.id}:${i}`,
          dispatch_namespace: SCOPE,
          company_id: worker.company_id,
          department_id: worker.department_id,
          worker_id: worker.id,
          version_id: version.id,
          script_name: worker.script_name,
          payload: {releaseGeneration: version.release_generation, baseRevision: i},
        })
        // Leased by a runner that died: the lease ran out long ago (the runners use the real clock).
        if (i < EXPIRED_LEASES) await tx.outbox.leaseById(row.id, {scope: SCOPE, owner: 'crashed-runner', leaseSeconds: 90})
      }
      for (const [i, key] of keys.entries()) {
        await tx.outbox.enqueue({
          operation: 'artifact_cleanup',
          dedupe_key: `artifact-cleanup:v${i}:bundle`,
          dispatch_namespace: SCOPE,
          payload: {kind: 'bundle', object_key: key, digest: sha256Hex(`orphan ${i}`)},
        })
      }
    })

    // Exclusivity is under test, not durability: the runners' commits need not wait for the disk.
    const url = t.backend === 'postgres' ? `${t.url}?options=${encodeURIComponent('-c synchronous_commit=off')}` : t.url
    const runs = await Promise.all(Array.from({length: PROCESSES}, (_, i) => runRunner(url, dataDir, `pass-${i}`)))
    for (const run of runs) {
      expect(run.stderr).toBe('')
      expect(run.code).toBe(0)
    }
    const reports = runs.map((run) => JSON.parse(run.stdout) as RunnerReport)
    const dispatched = reports.flatMap((report) => report.dispatched)
    const deleted = reports.flatMap((report) => report.deleted)
    expect(dispatched).toHaveLength(DEPLOYS)
    expect(new Set(dispatched).size).toBe(DEPLOYS)
    expect(deleted).toHaveLength(CLEANUPS)
    expect(new Set(deleted)).toEqual(new Set(keys))
    // The work was actually shared.
    expect(reports.filter((report) => report.dispatched.length + report.deleted.length > 0).length).toBeGreaterThan(1)

    const rows = await t.store.outbox.list({limit: DEPLOYS + CLEANUPS + 1})
    expect(rows).toHaveLength(DEPLOYS + CLEANUPS)
    expect(rows.filter((row) => row.status !== 'completed')).toEqual([])
    for (const key of keys) expect(await artifacts.has(key)).toBe(false)
  })
})
