// How `edgeworkers tail` prints the host's sampled notice in a terminal: one line, next to events.
import {expect, test} from 'vitest'
import {renderTailLine} from '../../../src/cli/tail-render.js'

test('a sampled notice is one line saying how many events were left out and the per-second cap', () => {
  const line = renderTailLine({type: 'sampled', time: '2026-12-01T18:00:00.000Z', script: 'dw-x', skipped: 1234, maxEventsPerSecond: 100}, false)
  expect(line).toBe('sampling: 1234 events skipped in the last second because of volume (a tail gets at most 100 per second)')
})

test('an event still prints its request line first', () => {
  const line = renderTailLine(
    {time: 't', script: 'dw-x', method: 'GET', path: '/a', status: 200, outcome: 'ok', durationMs: 2, logs: [], exceptions: [], truncated: false},
    false,
  )
  expect(line).toBe('t GET /a 200 ok 2ms')
})
