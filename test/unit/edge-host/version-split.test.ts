// The data plane's choice of release under a gradual deployment: split accuracy, key affinity that
// survives a raised percentage, and Cloudflare's override header.
import {describe, expect, test} from 'vitest'
import {chooseRelease, type SplitRoute, VERSION_KEY_HEADER, VERSION_OVERRIDES_HEADER} from '../../../src/edge-host/http/version-split.js'

const NEW = '3f2b9c1e-0000-4000-8000-000000000001'
const NEW_ORIGINAL = '3f2b9c1e-0000-4000-8000-00000000000a'
const OLD = '3f2b9c1e-0000-4000-8000-000000000002'
/** The current (uploaded) release at `percentage`, the old one beside it at the rest. */
const split = (percentage: number): SplitRoute => ({
  versionIds: [NEW, NEW_ORIGINAL],
  split: {releaseGeneration: 'a'.repeat(32), versionIds: [OLD], percentage: 100 - percentage},
})
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

const share = (picks: string[]) => picks.filter((pick) => pick === 'current').length / picks.length

describe('chooseRelease', () => {
  test('at 10 %, the new release gets 10 ± 1 % of 10,000 requests, drawn at random or by 10,000 keys', () => {
    const random = seeded(34)
    const drawn = Array.from({length: 10_000}, () => chooseRelease(split(10), {}, names, random))
    const keyed = Array.from({length: 10_000}, (_, i) => chooseRelease(split(10), {[VERSION_KEY_HEADER]: `user-${i}`}, names))
    for (const picks of [drawn, keyed]) {
      expect(share(picks)).toBeGreaterThanOrEqual(0.09)
      expect(share(picks)).toBeLessThanOrEqual(0.11)
    }
  })

  test("a key's requests all land on one release, and a raised percentage keeps every key the new release had", () => {
    const random = seeded(7)
    const at = (percentage: number, key: string) => chooseRelease(split(percentage), {[VERSION_KEY_HEADER]: key}, names, random)
    for (let i = 0; i < 200; i++) {
      const key = `session-${i}`
      const first = at(10, key)
      for (let repeat = 0; repeat < 20; repeat++) expect(at(10, key)).toBe(first)
      if (first === 'current') expect(at(20, key)).toBe('current')
      if (at(20, key) === 'current') expect(at(50, key)).toBe('current')
    }
  })

  test('the override header reaches a release of the deployment by script or department name and by either id, even at 0 %', () => {
    const request = (value: string) => ({[VERSION_OVERRIDES_HEADER]: value})
    expect(chooseRelease(split(0), request(`${SCRIPT}="${NEW}"`), names, () => 0.99)).toBe('current')
    expect(chooseRelease(split(0), request(`other="x", acme-sales="${NEW_ORIGINAL}"`), names, () => 0.99)).toBe('current')
    expect(chooseRelease(split(100), request(`acme-sales="${OLD}";why=smoke`), names, () => 0)).toBe('split')
  })

  test('an override that does not apply leaves the choice to the percentages', () => {
    for (const value of [
      `${SCRIPT}="not-in-the-deployment"`, // a version outside the deployment
      `someone-else="${NEW}"`, // another Worker's entry
      `${SCRIPT}=${NEW}`, // not a String: a token cannot hold this id
      `${SCRIPT}="${NEW}`, // not a dictionary at all
      `${SCRIPT}=("${NEW}")`, // an inner list
    ]) {
      expect(chooseRelease(split(10), {[VERSION_OVERRIDES_HEADER]: value}, names, () => 0.99)).toBe('split')
    }
  })
})
