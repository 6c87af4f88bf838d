// The rule every way of asking for a gradual deployment shares: at most two versions, percentages
// adding up to 100, two different releases, no split for a Worker with Durable Objects.
import {describe, expect, test} from 'vitest'
import type {KitError} from '../../../src/errors.js'
import {isServedNow, parseDeploymentSpec, percentageSplit, planDeployment} from '../../../src/engine/versions/deployment-spec.js'
import type {JsonObject, VersionRow} from '../../../src/store/index.js'

const version = (id: string, createdAt: number, fields: Partial<VersionRow> = {}): VersionRow =>
  ({id, created_at: createdAt, release_generation: `gen-${id}`, tag: null, manifest: {}, ...fields}) as VersionRow
const OLD = version('aaaa1111-0000-4000-8000-000000000000', 1, {tag: 'v1'})
const NEW = version('bbbb2222-0000-4000-8000-000000000000', 2, {tag: 'v2'})
const VERSIONS = [OLD, NEW]

const refusal = (run: () => unknown) => {
  try {
    run()
  } catch (error) {
    return `${(error as KitError).code}: ${(error as KitError).message}`
  }
  throw new Error('not refused')
}

describe('parseDeploymentSpec', () => {
  test('A@90 B@10 (% optional) names two versions, the newer first', () => {
    const shares = parseDeploymentSpec(VERSIONS, ['v1@90%', 'bbbb2222@10'])
    expect(shares.map((share) => [share.version.id, share.percentage])).toEqual([
      [NEW.id, 10],
      [OLD.id, 90],
    ])
    expect(parseDeploymentSpec(VERSIONS, ['v2@100']).map((share) => share.percentage)).toEqual([100])
  })

  test('bad specs are refused with one line', () => {
    expect(refusal(() => parseDeploymentSpec(VERSIONS, ['v1@50', 'v2@30']))).toBe('usage: the percentages add up to 80; they must add up to 100')
    expect(refusal(() => parseDeploymentSpec(VERSIONS, ['v1@50', 'v2@25', 'v1@25']))).toBe('usage: a deployment holds one or two versions; 3 given')
    expect(refusal(() => parseDeploymentSpec(VERSIONS, ['v1']))).toBe('usage: "v1" is not <version>@<percentage> (e.g. v1.2@10)')
    expect(refusal(() => parseDeploymentSpec(VERSIONS, ['v9@100']))).toMatch(/^not_found: version v9 not found/)
    const copy = version('cccc3333-0000-4000-8000-000000000000', 3, {release_generation: OLD.release_generation})
    expect(refusal(() => parseDeploymentSpec([...VERSIONS, copy], ['v1@50', 'cccc3333@50']))).toBe(
      `usage: ${OLD.id} and ${copy.id} are the same release; name two different versions`,
    )
  })

  test('a Worker with Durable Objects keeps one version, as on Cloudflare', () => {
    const withObjects = version('dddd4444-0000-4000-8000-000000000000', 4, {manifest: {durableObjects: [{binding: 'ROOMS', className: 'Room'}]}})
    expect(refusal(() => parseDeploymentSpec([...VERSIONS, withObjects], ['v1@90', 'dddd4444@10']))).toBe(
      'usage: a Worker with Durable Objects keeps one version: deploy it at 100 %',
    )
    expect(parseDeploymentSpec([...VERSIONS, withObjects], ['dddd4444@100'])).toHaveLength(1)
  })

  test('a Worker with KV, D1, R2, queues or static assets splits: its data is one whatever the version, and each version serves its own assets', () => {
    for (const manifest of [
      {kvNamespaces: [{binding: 'CACHE', id: 'cache'}]},
      {d1Databases: [{binding: 'DB', databaseName: 'app', id: 'app'}]},
      {r2Buckets: [{binding: 'FILES', bucketName: 'files'}]},
      {queues: {producers: [{binding: 'JOBS', queue: 'jobs'}], consumers: [{queue: 'jobs'}]}},
      {assets: {directory: 'public'}},
    ] as JsonObject[]) {
      const stateful = version('eeee5555-0000-4000-8000-000000000000', 5, {manifest})
      expect(parseDeploymentSpec([...VERSIONS, stateful], ['eeee5555@10', 'v1@90']).map((share) => share.percentage)).toEqual([10, 90])
    }
  })
})

describe('planDeployment', () => {
  const THIRD = version('cccc3333-0000-4000-8000-000000000000', 3, {tag: 'v3'})
  const ALL = [OLD, NEW, THIRD]
  const plan = (current: VersionRow | undefined, specs: string[]) => planDeployment(parseDeploymentSpec(ALL, specs), ALL, current)

  test('one version at 100 is served alone', () => {
    expect(plan(OLD, ['v2@100'])).toEqual({target: NEW, split: null})
  })

  test('a split uploads the version not served now and keeps the served one beside it', () => {
    expect(plan(OLD, ['v1@90', 'v2@10'])).toEqual({
      target: NEW,
      split: {percentage: 10, beside: {version_id: OLD.id, release_generation: OLD.release_generation, percentage: 90}},
    })
    // The served one may be the newer: the older is then uploaded.
    expect(plan(NEW, ['v1@30', 'v2@70']).target).toBe(OLD)
  })

  test('while a split is live, a change keeps both served versions and uploads the newer', () => {
    const live = {...NEW, split: {percentage: 10, beside: {version_id: OLD.id, release_generation: OLD.release_generation, percentage: 90}}}
    expect(plan(live, ['v1@50', 'v2@50'])).toEqual({
      target: NEW,
      split: {percentage: 50, beside: {version_id: OLD.id, release_generation: OLD.release_generation, percentage: 50}},
    })
    expect(isServedNow(live, NEW, live.split)).toBe(true)
    expect(isServedNow(live, NEW, null)).toBe(false)
  })

  test('a split of two versions neither of which is served is refused', () => {
    expect(refusal(() => plan(THIRD, ['v1@50', 'v2@50']))).toBe(`usage: a split keeps a version the Worker serves now (${THIRD.id}): name it as one of the two`)
  })
})

describe('percentageSplit', () => {
  test('the new build at P beside the version served now; 100 is a plain deploy', () => {
    expect(percentageSplit(NEW, VERSIONS, OLD, 10)).toEqual({
      percentage: 10,
      beside: {version_id: OLD.id, release_generation: OLD.release_generation, percentage: 90},
    })
    expect(percentageSplit(NEW, VERSIONS, OLD, 100)).toBeNull()
    expect(refusal(() => percentageSplit(NEW, VERSIONS, NEW, 10))).toBe(
      'usage: a split needs a version the Worker serves now with another release: deploy this one at 100 first',
    )
  })
})
