// Several kits on one PostgreSQL database: 4 kits (4 scopes), a reconcile process each, all at once
// over due deploy rows of every kit plus rows each kit left failed. No kit claims or settles another
// kit's rows, each row is dispatched exactly once, each kit's pass reports only its own leftovers, and
// what `edgeworkers status` reads for a kit (the store's status counts) holds only that kit's rows.
// The deploy dispatch is the recording stand-in (lease by id in the runner's scope, settle): what is
// under test is the sweeps' scoping, not the host.
import {spawn} from 'node:child_process'
import {fileURLToPath} from 'node:url'
import {expect, test} from 'vitest'
import {describeStore} from '../../support/stores.js'
import {seedWorker} from './support.js'

const RUNNER = fileURLToPath(new URL('./pass-runner.ts', import.meta.url))
const KITS = ['onprem:00000000000a', 'onprem:00000000000b', 'onprem:00000000000c', 'onprem:00000000000d']
const PROCESSES_PER_KIT = 1
const DEPLOYS_PER_KIT = 24
const WORKERS_PER_KIT = 4

interface RunnerReport {
  owner: string
  dispatched: string[]
  remaining: {failed: number; uncertain: number} | null
}

function runRunner(url: string, dataDir: string, owner: string, scope: string): Promise<{code: number | null; stdout: string; stderr: string}> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', RUNNER, url, dataDir, owner, scope], {stdio: ['ignore', 'pipe', 'pipe']})
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk) => (stdout += chunk))
    child.stderr.on('data', (chunk) => (stderr += chunk))
    child.on('error', reject)
    child.on('close', (code) => resolve({code, stdout, stderr}))
  })
}

describeStore('postgres', 'several kits on one database', (t) => {
  test(`${KITS.length} kits × ${PROCESSES_PER_KIT} pass process(es) at once: each takes, settles and reports only its own rows`, {
    timeout: 120_000,
  }, async () => {
    const rowsOfKit = new Map<string, Set<string>>()
    for (const [k, scope] of KITS.entries()) {
      const seeds = await Promise.all(Array.from({length: WORKERS_PER_KIT}, () => seedWorker(t)))
      const row = (i: number, {worker, version} = seeds[i % WORKERS_PER_KIT]!) => ({
        operation: 'deploy' as const,
        dedupe_key: `deploy:${worker.id}:${version.id}:${i}`,
        dispatch_namespace: scope,
        company_id: worker.company_id,
        department_id: worker.department_id,
        worker_id: worker.id,
        version_id: version.id,
        script_name: worker.script_name,
        payload: {releaseGeneration: version.release_generation, baseRevision: i},
      })
      const ids = new Set<string>()
      await t.store.transaction(async (tx) => {
        for (let i = 0; i < DEPLOYS_PER_KIT; i++) ids.add((await tx.outbox.enqueue(row(i))).row.id)
        // Kit k has k + 1 rows waiting for an operator: its pass must count those and no other kit's.
        for (let i = 0; i <= k; i++) {
          const {row: failed} = await tx.outbox.enqueue(row(DEPLOYS_PER_KIT + i))
          const lease = await tx.outbox.leaseById(failed.id, {scope, owner: 'operator-test', leaseSeconds: 60})
          await tx.outbox.settle(failed.id, lease.row!.lease_token!, {status: 'failed', errorCode: 'edge_host_4xx', error: 'refused'})
        }
      })
      rowsOfKit.set(scope, ids)
    }

    // Exclusivity is under test, not durability: the runners' commits need not wait for the disk.
    const url = `${t.url}?options=${encodeURIComponent('-c synchronous_commit=off')}`
    const dataDir = t.settings().data_dir
    const runs = await Promise.all(
      KITS.flatMap((scope, k) =>
        Array.from({length: PROCESSES_PER_KIT}, (_, p) => runRunner(url, dataDir, `kit-${k}-pass-${p}`, scope).then((run) => ({scope, k, run}))),
      ),
    )
    const dispatchedByKit = new Map<string, string[]>(KITS.map((scope) => [scope, []]))
    for (const {scope, k, run} of runs) {
      expect(run.stderr).toBe('')
      expect(run.code).toBe(0)
      const report = JSON.parse(run.stdout) as RunnerReport
      dispatchedByKit.get(scope)!.push(...report.dispatched)
      expect(report.remaining).toEqual({failed: k + 1, uncertain: 0})
    }
    for (const scope of KITS) {
      const dispatched = dispatchedByKit.get(scope)!
      expect(dispatched).toHaveLength(DEPLOYS_PER_KIT)
      expect(new Set(dispatched)).toEqual(rowsOfKit.get(scope))
    }
    const rows = await t.store.outbox.list({operation: 'deploy', limit: 10_000})
    expect(rows.filter((row) => row.status === 'completed')).toHaveLength(KITS.length * DEPLOYS_PER_KIT)
    // Settled by one of its own kit's passes, and every failed row left as it was.
    for (const row of rows.filter((row) => row.status === 'completed')) {
      expect(row.lease_owner ?? '').toMatch(new RegExp(`^kit-${KITS.indexOf(row.dispatch_namespace!)}-pass-`))
    }
    expect(rows.filter((row) => row.status === 'failed').map((row) => row.lease_owner)).toEqual(KITS.flatMap((_, k) => Array(k + 1).fill('operator-test')))
    for (const [k, scope] of KITS.entries()) {
      const finished = (await t.store.status.finishedCounts(scope, 0)).filter((count) => count.count > 0)
      expect(finished).toEqual([{operation: 'deploy', status: 'completed', count: DEPLOYS_PER_KIT}])
      expect(await t.store.status.openCounts(scope)).toEqual([{operation: 'deploy', status: 'failed', count: k + 1}])
      expect(await t.store.status.errorGroups(scope)).toEqual([expect.objectContaining({status: 'failed', operation: 'deploy', count: k + 1})])
    }
  })
})
