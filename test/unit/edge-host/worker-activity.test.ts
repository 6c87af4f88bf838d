// The activity window: requests the Node data plane timed and batches the HAProxy fast path counted add up;
// the p99 is of the timed ones (null when there are none); what is older than the window goes.
import {expect, test} from 'vitest'
import {ActivityWindow} from '../../../src/edge-host/worker-activity.js'

test('timed requests and counted batches add up; the p99 is of the timed ones', () => {
  const window = new ActivityWindow(60)
  window.counted('fast', 10, 2)
  window.failed('fast', 'Error: boom')
  window.served('mixed', 30, 200)
  window.served('mixed', 10, null)
  window.counted('mixed', 5, 0)
  expect(window.activity().workers).toEqual([
    {script: 'fast', requests: 10, errors: 2, p99Ms: null, lastError: 'Error: boom'},
    {script: 'mixed', requests: 7, errors: 1, p99Ms: 30, lastError: null},
  ])
})

test('requests older than the window go; a forgotten script has no activity', () => {
  const window = new ActivityWindow(60)
  window.counted('old', 3, 0)
  window.served('kept', 5, 200)
  window.forget('kept')
  expect(window.activity(Date.now() + 61_000).workers).toEqual([])
})
