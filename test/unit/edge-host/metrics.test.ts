// The host's /metrics follows Prometheus' conventions: Node's default metrics under their stock names,
// `_total` on counters only, a build-info gauge, and per-Worker series labelled with the department.
import {readFileSync} from 'node:fs'
import {describe, expect, test} from 'vitest'
import {HostMetrics, UNKNOWN_SCRIPT_LABEL} from '../../../src/edge-host/metrics.js'
import {WORKERD_VERSION} from '../../../src/util/build-info.js'

const KIT_VERSION = (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as {version: string}).version
const SALES = `dw-${'a'.repeat(48)}`
const LEGACY = `dw-${'b'.repeat(48)}`

function hostMetrics(): HostMetrics {
  return new HostMetrics({
    fenceActive: () => false,
    scriptCounts: () => ({active: 2, locked_down: 0, retired: 0}),
    quarantinedCount: () => 0,
    openConnections: () => 0,
    // LEGACY was uploaded by a kit that named no department.
    departmentOf: (script) => (script === SALES ? 'acme-sales' : null),
    readBindingOperations: async () => {},
    readFrontRequests: async () => {},
    readWorkerCounts: async () => {},
  })
}

/** Metric name → its TYPE. */
function types(text: string): Map<string, string> {
  return new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map(([, name, type]) => [name!, type!]))
}

describe('host metrics', () => {
  test("Node's default metrics keep their stock names, and only counters end in _total", async () => {
    const metricTypes = types(await hostMetrics().registry.metrics())
    for (const stock of [
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'process_start_time_seconds',
      'nodejs_eventloop_lag_seconds',
      'nodejs_heap_size_used_bytes',
    ]) {
      expect(metricTypes.has(stock), stock).toBe(true)
    }
    expect([...metricTypes.keys()].filter((name) => /^edgeworkers_host_(process|nodejs)_/.test(name))).toEqual([])
    expect([...metricTypes].filter(([name, type]) => name.endsWith('_total') !== (type === 'counter'))).toEqual([])
    // The per-type gauge stays: sum(nodejs_active_handles) is what the dropped _total gauge said.
    expect(metricTypes.get('nodejs_active_handles')).toBe('gauge')
  })

  test('edgeworkers_build_info names the kit, Node.js and workerd versions', async () => {
    const text = await hostMetrics().registry.metrics()
    expect(text).toContain(
      `\nedgeworkers_build_info{version="${KIT_VERSION}",node_version="${process.versions.node}",workerd_version="${WORKERD_VERSION}"} 1\n`,
    )
  })

  test('per-Worker series carry the department next to script when the upload named one', async () => {
    const metrics = hostMetrics()
    metrics.requests.inc({script: SALES, status: '200'})
    metrics.requests.inc({script: LEGACY, status: '200'})
    metrics.requests.inc({script: UNKNOWN_SCRIPT_LABEL, status: '404'})
    metrics.workerOutcomes.inc({script: SALES, outcome: 'ok'}, 3)
    metrics.workerWallSeconds.observe({script: SALES}, 0.02)
    const text = await metrics.registry.metrics()
    expect(text).toContain(`\nedgeworkers_host_requests_total{script="${SALES}",department="acme-sales",status="200"} 1\n`)
    expect(text).toContain(`\nedgeworkers_host_requests_total{script="${LEGACY}",status="200"} 1\n`)
    expect(text).toContain('\nedgeworkers_host_requests_total{script="unknown",status="404"} 1\n')
    expect(text).toContain(`\nedgeworkers_host_worker_invocations_total{script="${SALES}",department="acme-sales",outcome="ok"} 3\n`)
    expect(text).toContain(`\nedgeworkers_host_worker_wall_seconds_count{script="${SALES}",department="acme-sales"} 1\n`)

    // A retired script's series go (../../../src/edge-host/tail-hub.ts forget), department and all.
    metrics.workerOutcomes.remove({script: SALES, outcome: 'ok'})
    metrics.workerWallSeconds.remove({script: SALES})
    const after = await metrics.registry.metrics()
    expect(after).not.toMatch(new RegExp(`^edgeworkers_host_worker_(invocations_total|wall_seconds_\\w+)\\{script="${SALES}"`, 'm'))
  })
})
