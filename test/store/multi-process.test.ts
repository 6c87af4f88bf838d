// 8 OS processes claim and settle 5,000 rows on one database: every row is settled exactly once,
// none is lost, and no busy/lock error reaches a caller.
import {spawn} from 'node:child_process'
import {fileURLToPath} from 'node:url'
import {expect, test} from 'vitest'
import {describeEachStore} from '../support/stores.js'

const RUNNER = fileURLToPath(new URL('./claim-runner.ts', import.meta.url))
const PROCESSES = 8
const ROWS = 5_000
const SCOPE = 'onprem:0123456789ab'

interface RunnerReport {
  owner: string
  settled: string[]
  lost: number
}

function runRunner(url: string, dataDir: string, owner: string): Promise<{code: number | null; stdout: string; stderr: string}> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', RUNNER, url, dataDir, SCOPE, owner], {stdio: ['ignore', 'pipe', 'pipe']})
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk) => (stdout += chunk))
    child.stderr.on('data', (chunk) => (stderr += chunk))
    child.on('error', reject)
    child.on('close', (code) => resolve({code, stdout, stderr}))
  })
}

describeEachStore('multi-process claims', (t) => {
  test(`${PROCESSES} processes settle ${ROWS} rows exactly once`, {timeout: 600_000}, async () => {
    await t.store.transaction(async (tx) => {
      // Due at epoch 0: the runners use the real clock, the harness a test clock.
      for (let i = 0; i < ROWS; i++)
        await tx.outbox.enqueue({operation: 'deploy', dedupe_key: `deploy:${i}`, dispatch_namespace: SCOPE, payload: {i}, next_attempt_at: 0})
    })

    const runs = await Promise.all(Array.from({length: PROCESSES}, (_, i) => runRunner(t.url, t.settings().data_dir, `runner-${i}`)))
    for (const run of runs) {
      expect(run.stderr).toBe('')
      expect(run.code).toBe(0)
    }
    const reports = runs.map((run) => JSON.parse(run.stdout) as RunnerReport)
    const settled = reports.flatMap((report) => report.settled)
    expect(reports.map((report) => report.lost)).toEqual(Array(PROCESSES).fill(0))
    expect(settled).toHaveLength(ROWS)
    expect(new Set(settled).size).toBe(ROWS)

    const rows = await t.store.outbox.list({limit: ROWS + 1})
    expect(rows).toHaveLength(ROWS)
    const settledBy = new Map(reports.flatMap((report) => report.settled.map((id) => [id, report.owner] as const)))
    for (const row of rows) {
      expect(row).toMatchObject({status: 'completed', attempts: 1, lease_owner: settledBy.get(row.id)})
    }
  })
})
