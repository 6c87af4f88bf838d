// The node_exporter textfile: content, last-success carried over from the previous file, atomic
// replacement, and paths that cannot be written.
import {mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'
import {describe, expect, test} from 'vitest'
import {lastSuccessTimes, renderMetrics} from '../../../../src/engine/pass/metrics.js'
import {assertMetricsFileWritable, writeMetricsFile, type LaneSummary, type PassResult} from '../../../../src/engine/pass/index.js'
import {KitError} from '../../../../src/errors.js'
import {WORKERD_VERSION} from '../../../../src/util/build-info.js'

const KIT_VERSION = (JSON.parse(readFileSync(new URL('../../../../package.json', import.meta.url), 'utf8')) as {version: string}).version
const STARTED = '2026-01-01T00:00:00.000Z'
const STARTED_S = Date.parse(STARTED) / 1000

function lane(name: LaneSummary['lane'], counts: Partial<LaneSummary> = {}): LaneSummary {
  return {lane: name, claimed: 0, completed: 0, retried: 0, failed: 0, uncertain: 0, skipped: 0, durationMs: 0, ...counts}
}

const PASS: PassResult = {
  status: 'ran',
  scope: 'onprem:0123456789ab',
  startedAt: STARTED,
  durationMs: 1_500,
  fences: [],
  lanes: [
    lane('recovery', {claimed: 4, completed: 2, retried: 1, failed: 1, durationMs: 1_250}),
    lane('artifact_cleanup', {claimed: 3, skipped: 3, durationMs: 250, error: 'artifact store is not usable'}),
  ],
  remaining: {failed: 5, uncertain: 1},
  waiting: null,
}

describe('reconcile metrics textfile', () => {
  test('per-lane counts by outcome, durations, errors, last-success time, and the rows left for an operator', async () => {
    const text = await renderMetrics(
      PASS,
      new Map([
        ['artifact_cleanup', 1_700_000_000],
        ['deferred', 1_600_000_000],
      ]),
    )
    const samples = text.split('\n').filter((line) => line && !line.startsWith('#'))
    expect(samples).toEqual([
      `edgeworkers_build_info{version="${KIT_VERSION}",node_version="${process.versions.node}",workerd_version="${WORKERD_VERSION}"} 1`,
      `edgeworkers_reconcile_pass_timestamp_seconds ${STARTED_S}`,
      'edgeworkers_reconcile_pass_duration_seconds 1.5',
      'edgeworkers_reconcile_pass_skipped 0',
      'edgeworkers_reconcile_lane_rows{lane="recovery",outcome="claimed"} 4',
      'edgeworkers_reconcile_lane_rows{lane="recovery",outcome="completed"} 2',
      'edgeworkers_reconcile_lane_rows{lane="recovery",outcome="retried"} 1',
      'edgeworkers_reconcile_lane_rows{lane="recovery",outcome="failed"} 1',
      'edgeworkers_reconcile_lane_rows{lane="recovery",outcome="uncertain"} 0',
      'edgeworkers_reconcile_lane_rows{lane="recovery",outcome="skipped"} 0',
      'edgeworkers_reconcile_lane_rows{lane="artifact_cleanup",outcome="claimed"} 3',
      'edgeworkers_reconcile_lane_rows{lane="artifact_cleanup",outcome="completed"} 0',
      'edgeworkers_reconcile_lane_rows{lane="artifact_cleanup",outcome="retried"} 0',
      'edgeworkers_reconcile_lane_rows{lane="artifact_cleanup",outcome="failed"} 0',
      'edgeworkers_reconcile_lane_rows{lane="artifact_cleanup",outcome="uncertain"} 0',
      'edgeworkers_reconcile_lane_rows{lane="artifact_cleanup",outcome="skipped"} 3',
      'edgeworkers_reconcile_lane_duration_seconds{lane="recovery"} 1.25',
      'edgeworkers_reconcile_lane_duration_seconds{lane="artifact_cleanup"} 0.25',
      'edgeworkers_reconcile_lane_error{lane="recovery"} 0',
      'edgeworkers_reconcile_lane_error{lane="artifact_cleanup"} 1',
      // recovery succeeded now; cleanup failed and keeps its earlier time; deferred did not run and keeps its own.
      `edgeworkers_reconcile_lane_last_success_timestamp_seconds{lane="recovery"} ${STARTED_S + 1.5}`,
      'edgeworkers_reconcile_lane_last_success_timestamp_seconds{lane="deferred"} 1600000000',
      'edgeworkers_reconcile_lane_last_success_timestamp_seconds{lane="artifact_cleanup"} 1700000000',
      'edgeworkers_reconcile_rows_unsettled{status="failed"} 5',
      'edgeworkers_reconcile_rows_unsettled{status="uncertain"} 1',
    ])
    // Every metric has its HELP and TYPE lines, once.
    for (const name of new Set(samples.map((sample) => sample.split(/[{ ]/)[0]!))) {
      expect(text.match(new RegExp(`^# HELP ${name} `, 'gm'))).toHaveLength(1)
      expect(text.match(new RegExp(`^# TYPE ${name} gauge$`, 'gm'))).toHaveLength(1)
    }
    expect(text.endsWith('\n')).toBe(true)
  })

  test('a skipped pass says so and keeps every earlier last-success time', async () => {
    const skipped: PassResult = {
      status: 'skipped',
      skipped: {code: 'edge_workers_provider_invalid', message: 'x'},
      scope: '',
      startedAt: STARTED,
      durationMs: 3,
      lanes: [],
      fences: [],
      remaining: null,
      waiting: null,
    }
    const text = await renderMetrics(skipped, new Map([['recovery', 1_700_000_000]]))
    expect(text).toContain('edgeworkers_reconcile_pass_skipped 1\n')
    expect(text).toContain('edgeworkers_reconcile_lane_last_success_timestamp_seconds{lane="recovery"} 1700000000\n')
    expect(text).not.toContain('lane_rows')
    expect(text).not.toContain('rows_unsettled')
  })

  test('written by atomic rename, reading the previous file for last-success times', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-metrics-'))
    const file = path.join(dir, 'edgeworkers.prom')
    writeFileSync(file, '# old\nedgeworkers_reconcile_lane_last_success_timestamp_seconds{lane="artifact_cleanup"} 1700000000\n')
    await assertMetricsFileWritable(file)
    await writeMetricsFile(file, PASS)
    const written = readFileSync(file, 'utf8')
    expect(written).toBe(await renderMetrics(PASS, new Map([['artifact_cleanup', 1_700_000_000]])))
    expect(lastSuccessTimes(written)).toEqual(
      new Map([
        ['recovery', STARTED_S + 1.5],
        ['artifact_cleanup', 1_700_000_000],
      ]),
    )
    expect(readdirSync(dir)).toEqual(['edgeworkers.prom'])
  })

  test('a path in a missing directory, or a directory, is refused as a usage error', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'edgeworkers-metrics-'))
    mkdirSync(path.join(dir, 'taken.prom'))
    await expect(assertMetricsFileWritable(path.join(dir, 'missing', 'x.prom'))).rejects.toThrow(
      new KitError('usage', `metrics file ${path.join(dir, 'missing', 'x.prom')} is not writable: directory ${path.join(dir, 'missing')}: ENOENT`),
    )
    await expect(assertMetricsFileWritable(path.join(dir, 'taken.prom'))).rejects.toThrow(
      `metrics file ${path.join(dir, 'taken.prom')} is not writable: it is a directory`,
    )
    await expect(writeMetricsFile(path.join(dir, 'taken.prom'), PASS)).rejects.toThrow(/is not writable: EISDIR/)
    expect(readdirSync(dir)).toEqual(['taken.prom'])
  })
})
