// The rule every way of asking for a gradual deployment shares: at most two versions, percentages
// adding up to 100, two different releases, no split for a Worker with Durable Objects.
import {describe, expect, test} from 'vitest'
import type {KitError} from '../../../src/errors.js'
import {parseDeploymentSpec} from '../../../src/engine/versions/deployment-spec.js'
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

  test('so does a Worker with KV, D1, R2 or queues: this host keeps their data in its Durable Object storage', () => {
    const cases: Array<[JsonObject, string]> = [
      [{kvNamespaces: [{binding: 'CACHE', id: 'cache'}]}, 'KV namespaces'],
      [{d1Databases: [{binding: 'DB', databaseName: 'app', id: 'app'}]}, 'D1 databases'],
      [{r2Buckets: [{binding: 'FILES', bucketName: 'files'}]}, 'R2 buckets'],
      [{queues: {producers: [{binding: 'JOBS', queue: 'jobs'}]}}, 'queues'],
    ]
    for (const [manifest, named] of cases) {
      const stateful = version('eeee5555-0000-4000-8000-000000000000', 5, {manifest})
      expect(refusal(() => parseDeploymentSpec([...VERSIONS, stateful], ['eeee5555@10', 'v1@90']))).toBe(
        `usage: a Worker with ${named} (kept in its Durable Object storage) keeps one version: deploy it at 100 %`,
      )
    }
  })
})
