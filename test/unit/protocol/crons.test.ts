// Cron triggers read as Cloudflare reads them (its documented examples): five fields in UTC, Quartz
// weekday numbering (1 = Sunday), L / W / # — and the occurrences the host's scheduler computes.
import {expect, test} from 'vitest'
import {cronProblem, lastCronTime, nextCronTime} from '../../../src/protocol/management-api.js'

const at = (iso: string) => Date.parse(iso)
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())
// Wednesday 2 December 2026, 13:05:30 UTC.
const NOW = at('2026-12-02T13:05:30Z')

test("Cloudflare's examples fire when its documentation says", () => {
  const next = (cron: string) => iso(nextCronTime(cron, NOW))
  expect(next('* * * * *')).toBe('2026-12-02T13:06:00.000Z')
  expect(next('*/30 * * * *')).toBe('2026-12-02T13:30:00.000Z')
  expect(next('45 * * * *')).toBe('2026-12-02T13:45:00.000Z')
  // 5PM on Sunday, by name and as day 1.
  expect(next('0 17 * * sun')).toBe('2026-12-06T17:00:00.000Z')
  expect(next('0 17 * * 1')).toBe('2026-12-06T17:00:00.000Z')
  // 7:10AM on weekdays.
  expect(next('10 7 * * mon-fri')).toBe('2026-12-03T07:10:00.000Z')
  expect(next('10 7 * * 2-6')).toBe('2026-12-03T07:10:00.000Z')
  expect(next('0 15 1 * *')).toBe('2027-01-01T15:00:00.000Z')
  // 6PM on the last Friday of the month.
  expect(next('0 18 * * 6L')).toBe('2026-12-25T18:00:00.000Z')
  expect(next('0 18 * * friL')).toBe('2026-12-25T18:00:00.000Z')
  // 11:59PM on the last weekday of the month; the second Monday; months by name.
  expect(next('59 23 LW * *')).toBe('2026-12-31T23:59:00.000Z')
  expect(next('0 10 * * MON#2')).toBe('2026-12-14T10:00:00.000Z')
  expect(next('0 0 1 jan *')).toBe('2027-01-01T00:00:00.000Z')
})

test('the latest occurrence at or before a time, for the one run a miss gets', () => {
  expect(iso(lastCronTime('*/5 * * * *', NOW))).toBe('2026-12-02T13:05:00.000Z')
  expect(iso(lastCronTime('*/5 * * * *', at('2026-12-02T13:05:00Z')))).toBe('2026-12-02T13:05:00.000Z')
  expect(iso(lastCronTime('0 17 * * 1', NOW))).toBe('2026-11-29T17:00:00.000Z')
})

test('expressions Cloudflare would not run are refused with the reason', () => {
  expect(cronProblem('* * * * *')).toBeNull()
  expect(cronProblem('* * * *')).toBe('it must have five fields: minute, hour, day of month, month, day of week')
  expect(cronProblem('0 * * * * *')).toBe('it must have five fields: minute, hour, day of month, month, day of week')
  expect(cronProblem('61 * * * *')).toBe('Invalid value for minute: 61')
  expect(cronProblem('0 0 31 2 *')).toBe('it never fires')
  expect(cronProblem('0 0 * * 8')).toBe('day of week 8 is not 1–7 (1 = Sunday) or SUN–SAT')
  expect(cronProblem('0 0 * * 0,2')).toBe('day of week 0 is not 1–7 (1 = Sunday) or SUN–SAT')
  expect(cronProblem('0 0 * * 2-7/2')).toBeNull()
  expect(cronProblem('0 0 * * 6#5')).toBeNull()
  expect(cronProblem('@daily')).not.toBeNull()
})
