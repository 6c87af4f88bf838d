// The retry rule (src/engine/retry.ts): waits back off on their own count and never run out; failed
// attempts back off on the attempts and run out at max_attempts; only a request that left the kit
// counts as asking the host.
import {expect, test} from 'vitest'
import {askedHost, retryCauseOf, retryPlan} from '../../../src/engine/retry.js'
import {ProviderError} from '../../../src/provider/types.js'

const backoff = {ladder_seconds: [5, 15, 30], jitter_ratio: 0, max_attempts: 2}
const NOW = 1_000_000

test('a wait takes the step of its consecutive waits, the last step repeating, and never fails the row', () => {
  expect([0, 1, 2, 50].map((waits) => retryPlan(backoff, 'wait', {attempts: 99, waits}, NOW))).toEqual([
    {nextAttemptAt: NOW + 5_000, waits: 1},
    {nextAttemptAt: NOW + 15_000, waits: 2},
    {nextAttemptAt: NOW + 30_000, waits: 3},
    {nextAttemptAt: NOW + 30_000, waits: 51},
  ])
})

test('a failed attempt takes the step of the attempts, ends the run of waits, and fails the row at max_attempts', () => {
  expect(retryPlan(backoff, 'failed_attempt', {attempts: 1, waits: 7}, NOW)).toEqual({nextAttemptAt: NOW + 5_000, waits: 0})
  expect(retryPlan(backoff, 'failed_attempt', {attempts: 2, waits: 0}, NOW)).toEqual({nextAttemptAt: null, waits: 0})
})

test('an unavailable host is waited for; an answer the kit cannot use is a failed attempt; only a refused connection asked nothing', () => {
  const unreachable = new ProviderError('retryable', 'edge_host_unreachable', 'ECONNREFUSED')
  expect(retryCauseOf(unreachable)).toBe('wait')
  expect(retryCauseOf(new ProviderError('retryable', 'edge_host_5xx', '503', 503))).toBe('wait')
  expect(retryCauseOf(new ProviderError('ambiguous', 'edge_host_no_answer', 'cut'))).toBe('wait')
  expect(retryCauseOf(new ProviderError('fenced', 'edge_host_fenced', 'fenced', 409))).toBe('wait')
  expect(retryCauseOf(new ProviderError('retryable', 'edge_host_bad_response', 'garbage', 200))).toBe('failed_attempt')
  expect(retryCauseOf(new ProviderError('terminal', 'edge_host_unauthorized', 'no', 401))).toBe('failed_attempt')
  expect(askedHost(unreachable)).toBe(false)
  expect(askedHost(new ProviderError('retryable', 'edge_host_5xx', '503', 503))).toBe(true)
  expect(askedHost(new Error('anything else'))).toBe(true)
})
