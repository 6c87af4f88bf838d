import {expect, test} from 'vitest'
import {parseFilter, type Filterable} from '../../../src/tui/filter.js'

const rows: Array<Filterable & {name: string}> = [
  {
    name: 'a',
    op: 'deploy',
    status: 'failed',
    code: 'edge_host_5xx',
    script: 'dw-3f2a',
    id: '3f2b9c1e-aaaa',
    text: '3f2b9c1e-aaaa deploy failed dw-3f2a edge_host_5xx',
  },
  {
    name: 'b',
    op: 'artifact_cleanup',
    status: 'uncertain',
    code: 'worker_readiness_timeout',
    script: null,
    id: '77aa0000-bbbb',
    text: '77aa0000-bbbb artifact_cleanup uncertain',
  },
  {name: 'c', op: 'deploy', status: 'leased', code: null, script: 'dw-9911', id: '0c0c0c0c-cccc', text: '0c0c0c0c-cccc deploy leased dw-9911 host-b:42:feed'},
]

function shown(query: string): string[] {
  const parsed = parseFilter(query)
  if (!parsed.ok) throw new Error(parsed.error)
  return rows.filter((row) => parsed.filter?.matches(row) ?? true).map((row) => row.name)
}

test('key:value terms compare one field (code, script and id by prefix); plain words match the row text; every term must match', () => {
  expect(shown('')).toEqual(['a', 'b', 'c'])
  expect(shown('op:deploy')).toEqual(['a', 'c'])
  expect(shown('operation:deploy status:failed')).toEqual(['a'])
  expect(shown('code:edge_host')).toEqual(['a'])
  expect(shown('error:worker')).toEqual(['b'])
  expect(shown('script:dw-99')).toEqual(['c'])
  expect(shown('id:77AA')).toEqual(['b'])
  expect(shown('HOST-B')).toEqual(['c'])
  expect(shown('deploy dw-3f')).toEqual(['a'])
  expect(parseFilter('  op:deploy   status:failed ')).toMatchObject({ok: true, filter: {source: 'op:deploy status:failed'}})
})

test('unknown keys, unknown operations or statuses and empty values are refused with a message, never guessed', () => {
  expect(parseFilter('lane:deploy')).toEqual({ok: false, error: 'unknown filter key "lane:" — use op:, status:, code:, script:, id: or plain words'})
  expect(parseFilter('op:deploys')).toEqual({ok: false, error: 'unknown operation "deploys" — one of deploy, artifact_cleanup, control_audit'})
  expect(parseFilter('status:stuck')).toEqual({
    ok: false,
    error: 'unknown status "stuck" — one of pending, deferred, leased, completed, failed, uncertain, cancelled',
  })
  expect(parseFilter('code:')).toEqual({ok: false, error: 'filter term "code:" needs a value after the colon'})
})
