// What the status view draws of a drill-in screen at 80 columns: every line fits, and a long error
// shows whole — the end, which says what to do, is not cut off; rows are named by their department.
import {expect, test} from 'vitest'
import type {OutboxRowDetail} from '../../../src/engine/status/actions.js'
import type {StatusSnapshot} from '../../../src/engine/status/snapshot.js'
import {wrapHanging} from '../../../src/tui/format.js'
import {groupRowsList} from '../../../src/tui/lists.js'
import {screenLines, type Frame} from '../../../src/tui/screens.js'

const ERROR =
  "cannot deploy: the edge host at http://127.0.0.1:8788 does not know this kit's pairing (edge_host_unpaired); pair it again: `edgeworkers host pair http://127.0.0.1:8788 --code CODE --replace`"

const row: OutboxRowDetail = {
  id: '3f2b9c1e-0000-4000-8000-000000000001',
  operation: 'deploy',
  status: 'failed',
  dedupe_key: 'deploy:x',
  company_id: 'acme',
  department_id: 'acme-sales',
  worker_id: null,
  version_id: null,
  script_name: `dw-${'1'.repeat(48)}`,
  dispatch_namespace: 'onprem:0123456789ab',
  payload: {releaseGeneration: 'rg-1'},
  attempts: 1,
  waits: 0,
  lease_owner: null,
  lease_expires_at: null,
  next_attempt_at: null,
  claimed_by: null,
  claim_expires_at: null,
  reserved_by: null,
  last_error_code: 'edge_host_unpaired',
  last_error: ERROR,
  created_at: 0,
  updated_at: 0,
}

test('a row whose error is longer than the view: every line fits 80 columns, continuation lines under the value, nothing cut', () => {
  const frame: Frame = {
    columns: 80,
    panel: 'attention',
    top: {kind: 'row', id: row.id, detail: row, error: null, scroll: 0},
    overlay: null,
    filter: null,
    list: null,
    items: [],
    panelSelected: 0,
    busy: null,
    message: null,
  }
  const lines = screenLines(frame, {} as StatusSnapshot, 40).map((line) => line.text)
  expect(lines.every((line) => line.length <= 80)).toBe(true)
  const start = lines.findIndex((line) => line.startsWith('last error'))
  const valueAt = lines[start]!.indexOf('edge_host_unpaired')
  const continued = lines.slice(start + 1).filter((line) => line.startsWith(' '.repeat(valueAt)) && line[valueAt] !== ' ')
  expect([lines[start]!.slice(valueAt), ...continued.map((line) => line.slice(valueAt))].join(' ')).toBe(`edge_host_unpaired: ${ERROR}`)
})

test('wrapHanging keeps short lines, and breaks a long one between words under its value', () => {
  expect(wrapHanging('short  line', 80)).toEqual(['short  line'])
  expect(wrapHanging('key  one two three four', 14)).toEqual(['key  one two', '     three', '     four'])
  expect(wrapHanging('  "payload": "a b c d e f"', 16)).toEqual(['  "payload": "a', '  b c d e f"'])
})

test("a group's rows are named by their department, and by their script only when they have none", () => {
  const list = groupRowsList([row, {...row, id: '3f2b9c1e-0000-4000-8000-000000000002', department_id: null}], 0)
  expect(list.items.map((item) => item.cells[1])).toEqual(['acme-sales', `dw-${'1'.repeat(48)}`])
})
