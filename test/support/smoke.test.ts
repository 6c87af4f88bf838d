import {inject, test, expect} from 'vitest'
import pg from 'pg'
test('pg reachable', async () => {
  const c = new pg.Client(inject('pgAdminUrl'))
  await c.connect()
  const r = await c.query('select 1 as x')
  expect(r.rows[0].x).toBe(1)
  await c.end()
})
