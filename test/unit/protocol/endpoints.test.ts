import {describe, expect, test} from 'vitest'
import {type Endpoint, matchPath, pathOf} from '../../../src/protocol/endpoint.js'
import {endpoints} from '../../../src/protocol/endpoints.js'

const NAME = `dw-${'a'.repeat(48)}`

describe('the endpoint table', () => {
  test('builds the request targets the kit has always sent', () => {
    expect(pathOf(endpoints.listScripts, {})).toBe('/v1/scripts')
    expect(pathOf(endpoints.listScripts, {}, {cursor: 'ZHct'})).toBe('/v1/scripts?cursor=ZHct')
    expect(pathOf(endpoints.listScripts, {}, {limit: 10, cursor: null})).toBe('/v1/scripts?limit=10')
    expect(pathOf(endpoints.putSecret, {name: NAME, secret: 'TOKEN'})).toBe(`/v1/scripts/${NAME}/secrets/TOKEN`)
    expect(pathOf(endpoints.accessPolicy, {name: NAME}, {releaseGeneration: 'r:1', waitMs: null})).toBe(
      `/v1/scripts/${NAME}/access-policy?releaseGeneration=r%3A1`,
    )
    expect(pathOf(endpoints.accessPolicy, {name: NAME}, {releaseGeneration: 'r1', waitMs: 500})).toBe(
      `/v1/scripts/${NAME}/access-policy?releaseGeneration=r1&waitMs=500`,
    )
    expect(pathOf(endpoints.receipt, {mutationId: 'm:1'}, {commandDigest: 'ab'})).toBe('/v1/receipts/m:1?commandDigest=ab')
    expect(pathOf(endpoints.snapshot, {}, {fenceId: 'backup:1'})).toBe('/v1/snapshot?fenceId=backup%3A1')
    expect(pathOf(endpoints.fenceEnd, {fenceId: 'backup:1'})).toBe('/v1/fence/backup:1/end')
  })

  test('each path matches its own targets and no other endpoint of its method matches them', () => {
    const all = Object.entries(endpoints) as Array<[string, Endpoint]>
    for (const [name, endpoint] of all) {
      const sample = endpoint.path.replace(/:([A-Za-z]+)/g, 'x1')
      expect(matchPath(endpoint, sample), name).not.toBeNull()
      const rivals = all.filter(([other, candidate]) => other !== name && candidate.method === endpoint.method && matchPath(candidate, sample))
      expect(
        rivals.map(([other]) => other),
        name,
      ).toEqual([])
    }
    expect(matchPath(endpoints.putSecret, `/v1/scripts/${NAME}/secrets/TOKEN`)).toEqual({name: NAME, secret: 'TOKEN'})
    expect(matchPath(endpoints.script, `/v1/scripts/${NAME}/secrets`)).toBeNull()
  })

  test('only identity, pairing and the health endpoints are unsigned', () => {
    const unsigned = Object.entries(endpoints).filter(([, endpoint]) => !endpoint.signed)
    expect(unsigned.map(([name]) => name).sort()).toEqual(['identity', 'livez', 'metrics', 'pair', 'readyz'])
  })
})
