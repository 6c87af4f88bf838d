// The data plane's choice of version under a gradual deployment: split accuracy, key affinity that
// survives a raised percentage, and Cloudflare's override header.
import {describe, expect, test} from 'vitest'
import {chooseVersion, type Deployment, VERSION_KEY_HEADER, VERSION_OVERRIDES_HEADER} from '../../../src/edge-host/http/version-split.js'

const NEW = {versionId: '3f2b9c1e-0000-4000-8000-000000000001', releaseGeneration: 'b'.repeat(32)}
const OLD = {versionId: '3f2b9c1e-0000-4000-8000-000000000002', releaseGeneration: 'a'.repeat(32)}
const split = (percentage: number): Deployment => [
  {...NEW, percentage},
  {...OLD, percentage: 100 - percentage},
]
const SCRIPT = `dw-${'0'.repeat(48)}`
const names = [SCRIPT, 'acme-sales']

/** A seeded generator (mulberry32), so the random draw is the same on every run. */
function seeded(seed: number): () => number {
  let state = seed
  return () => {
    state = (state + 0x6d2b79f5) | 0
    let t = Math.imul(state ^ (state >>> 15), 1 | state)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const share = (picks: Array<{versionId: string}>) => picks.filter((pick) => pick.versionId === NEW.versionId).length / picks.length

describe('chooseVersion', () => {
  test('one version serves everything, whatever the headers say', () => {
    const only: Deployment = [{...OLD, percentage: 100}]
    expect(chooseVersion(only, {headers: {[VERSION_OVERRIDES_HEADER]: `${SCRIPT}="${NEW.versionId}"`}, workerNames: names})).toBe(only[0])
  })

  test('at 10 %, the new version gets 10 ± 1 % of 10,000 requests, drawn at random or by 10,000 keys', () => {
    const random = seeded(34)
    const drawn = Array.from({length: 10_000}, () => chooseVersion(split(10), {headers: {}, workerNames: names}, random))
    const keyed = Array.from({length: 10_000}, (_, i) => chooseVersion(split(10), {headers: {[VERSION_KEY_HEADER]: `user-${i}`}, workerNames: names}))
    expect(share(drawn)).toBeGreaterThanOrEqual(0.09)
    expect(share(drawn)).toBeLessThanOrEqual(0.11)
    expect(share(keyed)).toBeGreaterThanOrEqual(0.09)
    expect(share(keyed)).toBeLessThanOrEqual(0.11)
  })

  test("a key's requests all land on one version, and a raised percentage keeps every key the new version had", () => {
    const random = seeded(7)
    const at = (percentage: number, key: string) =>
      chooseVersion(split(percentage), {headers: {[VERSION_KEY_HEADER]: key}, workerNames: names}, random).versionId
    for (let i = 0; i < 200; i++) {
      const key = `session-${i}`
      const first = at(10, key)
      for (let repeat = 0; repeat < 20; repeat++) expect(at(10, key)).toBe(first)
      if (first === NEW.versionId) expect(at(20, key)).toBe(NEW.versionId)
      if (at(20, key) === NEW.versionId) expect(at(50, key)).toBe(NEW.versionId)
    }
  })

  test('the override header reaches a version of the deployment by script or department name, even at 0 %', () => {
    const request = (value: string) => ({headers: {[VERSION_OVERRIDES_HEADER]: value}, workerNames: names})
    const none = () => 0.99 // the percentages would pick the old version
    expect(chooseVersion(split(0), request(`${SCRIPT}="${NEW.versionId}"`), none).versionId).toBe(NEW.versionId)
    expect(chooseVersion(split(0), request(`other="x", acme-sales="${NEW.versionId}"`), none).versionId).toBe(NEW.versionId)
    expect(chooseVersion(split(100), request(`acme-sales="${OLD.versionId}";why=smoke`), () => 0).versionId).toBe(OLD.versionId)
  })

  test('an override that does not apply leaves the choice to the percentages', () => {
    const request = (value: string) => ({headers: {[VERSION_OVERRIDES_HEADER]: value}, workerNames: names})
    const old = () => 0.99
    for (const value of [
      `${SCRIPT}="not-in-the-deployment"`, // a version outside the deployment
      `someone-else="${NEW.versionId}"`, // another Worker's entry
      `${SCRIPT}=${NEW.versionId}`, // not a String: a token cannot hold this id
      `${SCRIPT}="${NEW.versionId}`, // not a dictionary at all
      `${SCRIPT}=("${NEW.versionId}")`, // an inner list
    ]) {
      expect(chooseVersion(split(10), request(value), old).versionId).toBe(OLD.versionId)
    }
  })
})
