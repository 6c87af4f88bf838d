// One outcome per row (src/engine/row-result.ts): the deploy task's result is translated once
// (src/engine/deploy/row-result.ts), and a lane counts each outcome in exactly one column.
import {expect, test} from 'vitest'
import {deployRowResult, GATE_CLOSED} from '../../../src/engine/deploy/row-result.js'
import type {DeployTaskResult} from '../../../src/engine/deploy/task.js'
import {countOf} from '../../../src/engine/pass/lane.js'

const results: Array<[DeployTaskResult, ReturnType<typeof deployRowResult>, string]> = [
  [
    {outcome: 'completed', versionId: 'v', releaseGeneration: 'g', scriptName: 's', reconciled: false},
    {outcome: 'done', code: null, message: null},
    'completed',
  ],
  [
    {outcome: 'superseded', code: 'deploy_superseded', message: 'newer', newerVersionId: 'v2'},
    {outcome: 'done', code: 'deploy_superseded', message: 'newer'},
    'completed',
  ],
  [{outcome: 'failed', code: 'c', message: 'm'}, {outcome: 'terminal', code: 'c', message: 'm'}, 'failed'],
  [{outcome: 'uncertain', code: 'c', message: 'm'}, {outcome: 'uncertain', code: 'c', message: 'm'}, 'uncertain'],
  [{outcome: 'retry', code: 'c', message: 'm', exhausted: false}, {outcome: 'requeue_after', code: 'c', message: 'm'}, 'retried'],
  [{outcome: 'retry', code: 'c', message: 'm', exhausted: true}, {outcome: 'terminal', code: 'c', message: 'm'}, 'failed'],
  [{outcome: 'retry_later', message: 'fenced'}, {outcome: 'skipped', reason: GATE_CLOSED, message: 'fenced'}, 'skipped'],
  [{outcome: 'skipped', disposition: 'inflight'}, {outcome: 'skipped', reason: 'inflight'}, 'skipped'],
  [{outcome: 'lease_lost'}, {outcome: 'skipped', reason: 'lease_lost'}, 'skipped'],
]

test.each(results)('a deploy task result %j is the row outcome %j, counted as %s', (task, row, counted) => {
  expect(deployRowResult(task)).toEqual(row)
  expect(countOf(deployRowResult(task))).toBe(counted)
})
